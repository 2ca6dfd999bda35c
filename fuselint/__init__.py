"""fuselint: find what stops PyTorch from fusing a model's operators, fix it, prove the gain."""

__version__ = "0.1.0"
