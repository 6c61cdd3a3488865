"""Third-party backends probed in their own processes, in parallel with the main pass.

Why: bitsandbytes' import alone took 4.2-4.4 s on the device machine (it loads its CUDA library and
wraps ops in torch.compile, which imports torch._dynamo), and a broken third-party build can
segfault or poison the CUDA context. Started before the child imports torch, a helper process
(``python -m gpudoctor.train --probe nf4:bitsandbytes --wait-for-go``) imports the backend on a
thread while it prepares the same seeded inputs as the main pass, then waits: it times its kernels
only when the main pass says ``go`` (after the main pass timed its own backends, so the two never
time each other's kernels). Its rows join the matrix, and its crash is a matrix entry, not the end
of the pass.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import signal
import subprocess
import sys
import tempfile

from .backend import BackendRow

# (capability, backend) -> the module whose presence means "installed".
EXTERNAL = {("nf4-dequant", "bitsandbytes"): "bitsandbytes", ("attention", "flash-attn"): "flash_attn"}
_CAPABILITY_ARG = {"nf4-dequant": "nf4", "attention": "attention"}


class SideProbe:
    def __init__(self, capability: str, backend: str, preset: str | None, command: list[str] | None = None):
        self.capability, self.backend = capability, backend
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()  # files, not pipes: a chatty import can never block on a full pipe
        command = command or [sys.executable, "-m", "gpudoctor.train", "--probe",
                              f"{_CAPABILITY_ARG[capability]}:{backend}", "--wait-for-go"] + \
            (["--preset", preset] if preset else [])
        self.process = subprocess.Popen(command, stdout=self.stdout, stderr=self.stderr, stdin=subprocess.PIPE)

    def go(self) -> None:
        """Let the probe time its kernels now (it has imported and prepared meanwhile)."""
        try:
            self.process.stdin.write(b"go\n")
            self.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it already died; row() says how

    def row(self, timeout_s: float = 120.0) -> BackendRow:
        self.go()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return self._failed("the probe process hung", f"killed after {timeout_s:.0f} s")
        self.stdout.seek(0)
        self.stderr.seek(0)
        out = self.stdout.read().decode("utf-8", "replace").strip()
        err = self.stderr.read().decode("utf-8", "replace")
        if self.process.returncode == 0 and out:
            try:
                return BackendRow(**json.loads(out.splitlines()[-1])["rows"][0])
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        code = self.process.returncode
        how = f"died with {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return self._failed(f"the probe process {how}", err[-3000:])

    def _failed(self, reason: str, tail: str) -> BackendRow:
        return BackendRow(self.capability, self.backend, status="fails", stage="process", reason=reason,
                          error_type="ProbeProcess", traceback_tail=tail)


def probably_gpu() -> bool:
    """An NVIDIA device node exists: a guess made before torch is imported (2-3 s), so the probes
    can start at once. A wrong guess costs little: the probe reports the backend unavailable."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def start(preset: str | None, on_gpu: bool) -> dict[tuple[str, str], SideProbe]:
    """Start a probe for each installed third-party backend (GPU only: they need CUDA). ``preset``
    None lets the probe choose the default exactly as the main pass does."""
    if not on_gpu:
        return {}
    return {key: SideProbe(*key, preset) for key, module in EXTERNAL.items() if importlib.util.find_spec(module)}


def collect(probes: dict[tuple[str, str], SideProbe], capability: str) -> dict[str, BackendRow]:
    return {backend: probe.row() for (cap, backend), probe in probes.items() if cap == capability}


def stop(probes: dict[tuple[str, str], SideProbe]) -> None:
    """End probes nobody collected (a stage before the matrix broke the CUDA context)."""
    for probe in probes.values():
        if probe.process.poll() is None:
            probe.process.kill()
            probe.process.wait()
