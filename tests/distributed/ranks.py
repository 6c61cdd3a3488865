"""Launch real local ranks of `gpudoctor check --distributed` (separate processes, torch's
rendezvous store on 127.0.0.1), the way torchrun or srun would: each gets RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT. A "sleeping" rank is a process that never runs
gpudoctor (a dead or hung rank, as the launcher would leave it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RankRun:
    returncode: int | None
    stdout: str
    stderr: str
    elapsed_s: float

    def json(self) -> dict:
        return json.loads(self.stdout)


def rank_env(rank: int, world: int, port: int, extra: dict | None = None, unset: tuple[str, ...] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SLURM_", "TORCHELASTIC_")) and k not in unset}
    # LOCAL_RANK 0 everywhere, as if each rank were on its own node: on a machine with fewer GPUs
    # than ranks a higher local rank would have no GPU, which is a real difference of its own.
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def launch(world: int, args: list[str], env_of: dict[int, dict] | None = None, sleepers: tuple[int, ...] = (),
           timeout_s: float = 60.0) -> dict[int, RankRun]:
    """Start every rank at once; wait for the gpudoctor ranks (not the sleepers, which are
    killed at the end). Returns each gpudoctor rank's outcome."""
    port = free_port()
    procs: dict[int, subprocess.Popen] = {}
    started = time.monotonic()
    for rank in range(world):
        env = rank_env(rank, world, port, (env_of or {}).get(rank))
        command = SLEEPER if rank in sleepers else [sys.executable, "-m", "gpudoctor", "check", "--distributed", *args]
        procs[rank] = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       stdin=subprocess.DEVNULL, text=True)
    runs: dict[int, RankRun] = {}
    try:
        for rank, proc in procs.items():
            if rank in sleepers:
                continue
            remaining = max(1.0, timeout_s - (time.monotonic() - started))
            out, err = proc.communicate(timeout=remaining)
            runs[rank] = RankRun(proc.returncode, out, err, time.monotonic() - started)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return runs
