"""The installed version, in a module of its own so that importing it costs nothing."""

__version__ = "0.2.0"
