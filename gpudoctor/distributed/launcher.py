"""`--nproc N`: torchrun on this host, each rank running `gpudoctor check --distributed`.

Rank 0 prints the report on our stdout; torchrun's own chatter (and its error summary when rank 0
exits 1) is kept back unless no report came. Rank 0 leaves its exit code in a file named by
RESULT_FILE_VAR, so the exit code is the check's, not torchrun's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading

RESULT_FILE_VAR = "GPUDOCTOR_DISTRIBUTED_RESULT"
_TAIL_CHARS = 8000


def launch_local(nproc: int, rank_argv: list[str], budget_s: float) -> int:
    """Run ``gpudoctor <rank_argv>`` as ``nproc`` ranks under torchrun's standalone rendezvous
    (a free port on this host); kill them all after ``budget_s``."""
    with tempfile.TemporaryDirectory(prefix="gpudoctor-nproc-") as tmp:
        result_file = os.path.join(tmp, "rank0-exit-code")
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                   f"--nproc-per-node={nproc}", "-m", "gpudoctor", *rank_argv]
        env = {**os.environ, RESULT_FILE_VAR: result_file}
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                   start_new_session=True)
        tail: list[bytes] = []
        reader = threading.Thread(target=_keep_tail, args=(process.stderr, tail), daemon=True)
        reader.start()
        try:
            process.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            _kill(process)
            sys.stderr.write(f"gpudoctor: error: torchrun did not finish within {budget_s:.0f} s; killed it\n")
            return 2
        except KeyboardInterrupt:
            _kill(process)
            raise
        reader.join(timeout=5)
        try:
            with open(result_file, encoding="utf-8") as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            text = b"".join(tail).decode("utf-8", "replace").strip()
            sys.stderr.write(text[-_TAIL_CHARS:] + "\n" if text else "")
            sys.stderr.write(f"gpudoctor: error: torchrun exited {process.returncode} before rank 0 reported\n")
            return 2


def record_exit_code(code: int) -> None:
    """Rank 0 under --nproc: leave the check's exit code for the launcher."""
    path = os.environ.get(RESULT_FILE_VAR)
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(str(code))


def _keep_tail(stream, tail: list[bytes]) -> None:
    size = 0
    for line in iter(stream.readline, b""):
        tail.append(line)
        size += len(line)
        while size > _TAIL_CHARS and len(tail) > 1:
            size -= len(tail.pop(0))


def _kill(process) -> None:
    from ..host.live import kill_process_group

    kill_process_group(process)
