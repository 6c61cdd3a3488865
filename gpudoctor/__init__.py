"""gpudoctor: an environment doctor and auto-fixer for GPU fine-tuning stacks."""

__version__ = "0.1.0"
