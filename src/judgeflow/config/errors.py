"""What a bad configuration raises, and the warnings loading one gives."""

from __future__ import annotations


class ConfigError(ValueError):
    """A recipe, profile or override is invalid; the message names the key and what to do."""


class IgnoredKeyWarning(UserWarning):
    """A key was set that only another engine or backend reads; this run ignores it."""


class SecretParameterWarning(UserWarning):
    """A secret-looking value was passed as an override: a flow parameter Prefect shows."""
