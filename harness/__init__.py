"""GPU server stress-test and acceptance harness."""

__version__ = "0.1.0"
