"""judgeflow: train generative judge and reward models as orchestrated, restartable pipelines.

Importing the package does nothing but define things; entry points set up logging, tracking
and services.
"""

__version__ = "0.1.0"
