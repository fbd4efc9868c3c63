"""The package's version: its one home (pyproject.toml reads it from here; the CLI and the hook print it)."""
__version__ = "0.1.0"
