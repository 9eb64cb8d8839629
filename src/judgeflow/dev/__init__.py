"""Developer tools: a tiny model built offline for CPU runs and tests."""

from judgeflow.dev.tiny_model import build_tiny_model

__all__ = ["build_tiny_model"]
