"""msq's version (the one place it is written; ``msq.__version__`` re-exports it)."""

VERSION = "0.1.0"
