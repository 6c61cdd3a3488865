"""gpudoctor: an environment doctor and auto-fixer for GPU fine-tuning stacks."""

__version__ = "0.1.0"

__all__ = ["preflight", "PreflightError", "__version__"]

_LAZY = ("preflight", "PreflightError", "PreflightResult")


def __getattr__(name):
    # Lazy, so `import gpudoctor` stays cheap for training scripts.
    if name in _LAZY:
        from . import hook as module  # not importlib.import_module: importlib is one more import
        for lazy in _LAZY:
            globals()[lazy] = getattr(module, lazy)
        return globals()[name]
    raise AttributeError(f"module 'gpudoctor' has no attribute {name!r}")
