"""rltrain's version, below everything that records it (checkpoints, notifications, the CLI)."""

__version__ = "0.1.0"
