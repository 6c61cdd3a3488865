"""Training-framework hooks that run :func:`gpudoctor.preflight` when training starts.

    from gpudoctor.integrations import PreflightCallback            # Hugging Face Trainer
    trainer = Trainer(..., callbacks=[PreflightCallback(require=["bf16"])])

    from gpudoctor.integrations import PreflightLightningCallback   # PyTorch Lightning
    trainer = L.Trainer(callbacks=[PreflightLightningCallback()])

Each class is built on first access with the framework's own base class when the framework is
installed (so the framework's isinstance checks pass) and ``object`` otherwise: importing this
module never imports transformers or lightning, and works without either.
"""

from __future__ import annotations

__all__ = ["PreflightCallback", "PreflightLightningCallback"]


def _base(candidates: tuple[tuple[str, str], ...]) -> type:
    import importlib

    for module_name, attr in candidates:
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            continue
    return object


def _run_preflight(options: dict):
    import gpudoctor

    return gpudoctor.preflight(**options)


def _make_hf_callback() -> type:
    base = _base((("transformers", "TrainerCallback"), ("transformers.trainer_callback", "TrainerCallback")))

    class PreflightCallback(base):  # type: ignore[misc, valid-type]
        """Hugging Face ``TrainerCallback``: preflight at ``on_train_begin`` (main process only
        reports; every process applies the env). Options are those of ``preflight()``."""

        def __init__(self, **options) -> None:
            self.options = options
            self.result = None

        def on_train_begin(self, args=None, state=None, control=None, **kwargs):
            quiet = self.options.get("quiet")
            if quiet is None and state is not None and not getattr(state, "is_world_process_zero", True):
                quiet = True  # one summary per job, not one per rank
            self.result = _run_preflight({**self.options, "quiet": quiet})
            return control

    return PreflightCallback


def _make_lightning_callback() -> type:
    base = _base((("lightning.pytorch", "Callback"), ("pytorch_lightning", "Callback")))

    class PreflightLightningCallback(base):  # type: ignore[misc, valid-type]
        """PyTorch Lightning ``Callback``: preflight at ``on_fit_start``."""

        def __init__(self, **options) -> None:
            self.options = options
            self.result = None

        def on_fit_start(self, trainer=None, pl_module=None) -> None:
            quiet = self.options.get("quiet")
            if quiet is None and trainer is not None and not getattr(trainer, "is_global_zero", True):
                quiet = True
            self.result = _run_preflight({**self.options, "quiet": quiet})

    return PreflightLightningCallback


_FACTORIES = {"PreflightCallback": _make_hf_callback, "PreflightLightningCallback": _make_lightning_callback}


def __getattr__(name: str):
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = factory()
    globals()[name] = cls  # build once
    return cls
