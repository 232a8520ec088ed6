"""pytest-goodput: LLM-serving performance as a merge gate."""

__version__ = "0.1.0"
