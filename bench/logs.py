"""Benchmark: log diagnosis throughput (MB/s) and peak memory, next to a reference.

Generates realistic training-log text from real healthy lines in fixtures/logs/healthy (see
`generate`: runs of startup lines then tqdm '\\r' progress bars and HF Trainer loss lines), with a
few real failure lines planted. The file is written to a temp dir by streaming (never held
in memory), then diagnosed in a child process per size so each peak RSS is its own.

Reference, measured on the same file in the same run: Python's plain binary line iteration
(`for line in f: n += 1`) and `grep -c` for a failure keyword.

    python bench/logs.py                 # 10 MB and 1 GB, prints a Markdown table
    python bench/logs.py --sizes 10,100  # sizes in MB
    python bench/logs.py --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures", "logs")


def _real_lines(pattern: str) -> list[str]:
    lines: list[str] = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, pattern))):
        with open(path, encoding="utf-8") as f:
            lines.extend(line.rstrip("\n") for line in f if line.strip())
    return lines


def generate(path: str, size_bytes: int, seed: int = 7, run_bytes: int = 5_000_000) -> int:
    """Write ~size_bytes of log text shaped like real runs; returns the failure lines planted.

    The file is a sequence of runs of ~run_bytes each. A run starts with the real startup lines
    once (Unsloth banner, NCCL INFO init, the seed's kernel-loading messages, deprecation
    warnings), then trains: tqdm '\\r' progress redraws with a real HF Trainer loss line every 50
    steps. A few real failure lines are planted at random places.
    """
    rng = random.Random(seed)
    loss_lines = _real_lines("healthy/hf-trainer-*.log")
    startup = [l for l in _real_lines("healthy/*.log") if l not in loss_lines]
    failures = [
        "/usr/bin/ld: cannot find -lcuda: No such file or directory",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of which 0 bytes is free.",
        "Unsloth 2026.1.3 patched 36 layers with 0 QKV layers, 0 O layers and 0 MLP layers.",
    ]
    step_total = 13464
    planted = written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            run = ["\n".join(startup)]
            run_size = len(run[0])
            step = 0
            while run_size < run_bytes:
                step += 1
                pct = step * 100 // step_total % 100
                part = (
                    f"\r{pct:3d}%|{'█' * (pct // 5):<20}| {step}/{step_total} "
                    f"[{step // 60:02d}:{step % 60:02d}<3:57:13, 1.{rng.randint(10, 99)}s/it, loss={rng.random() * 3:.4f}]"
                )
                if step % 50 == 0:
                    part += "\n" + rng.choice(loss_lines) + "\n"
                if rng.random() < 0.00002:
                    part += "\n" + rng.choice(failures) + "\n"
                    planted += 1
                run.append(part)
                run_size += len(part) + 2  # the bar is multi-byte UTF-8
            chunk = "".join(run) + "\n"
            out.write(chunk)
            written += len(chunk.encode("utf-8"))
        out.write(failures[0] + "\n")
        planted += 1
    return planted


def _peak_rss_mb_of_child(code: str, path: str, setup: str = "") -> tuple[float, float, str]:
    """Run `code` on `path` in a fresh interpreter; returns (seconds of `code` alone, peak RSS MB,
    its output). `setup` (imports, loading the signatures) runs before the clock starts."""
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and would report the forking parent's size.
    prog = (
        "import sys, time\n"
        "path = sys.argv[1]\n" + setup + "\n"
        "t0 = time.perf_counter()\n" + code + "\n"
        "dt = time.perf_counter() - t0\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(dt, int(hwm) / 1024, out, sep='\\t')\n"
    )
    result = subprocess.run([sys.executable, "-c", prog, path], capture_output=True, text=True, check=True, cwd=ROOT)
    seconds, rss, out = result.stdout.strip().split("\t", 2)
    return float(seconds), float(rss), out


GPUDOCTOR_SETUP = (
    "t_import = time.perf_counter()\n"
    "from gpudoctor.logs import default_matcher, diagnose_paths\n"
    "default_matcher()\n"
    "from gpudoctor.logs.findings import _catalogue; _catalogue()\n"
    "startup_ms = (time.perf_counter() - t_import) * 1000"
)
GPUDOCTOR = "out = ','.join(f.id for f in diagnose_paths([path])) + f' (startup {startup_ms:.0f} ms)'"
PY_LINES = "n = 0\nwith open(path, 'rb') as f:\n    for line in f:\n        n += 1\nout = n"
BASELINE = "out = 'interpreter only'"


def _grep_seconds(path: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["grep", "-c", "cannot find -lcuda", path], capture_output=True, check=False)
    return time.perf_counter() - t0


def measure(size_mb: int, tmpdir: str) -> dict:
    path = os.path.join(tmpdir, f"train-{size_mb}MB.log")
    planted = generate(path, size_mb * 1_000_000)
    size = os.path.getsize(path)
    try:
        g_s, g_rss, g_out = _peak_rss_mb_of_child(GPUDOCTOR, path, GPUDOCTOR_SETUP)
        p_s, p_rss, _ = _peak_rss_mb_of_child(PY_LINES, path)
        _, base_rss, _ = _peak_rss_mb_of_child(BASELINE, path)
        grep_s = _grep_seconds(path)
    finally:
        os.unlink(path)
    mb = size / 1e6
    return {
        "size_mb": round(mb, 1),
        "planted_failure_lines": planted,
        "findings": g_out,
        "gpudoctor_s": round(g_s, 3),
        "gpudoctor_mb_s": round(mb / g_s, 1),
        "gpudoctor_peak_rss_mb": round(g_rss, 1),
        "python_lines_mb_s": round(mb / p_s, 1),
        "python_lines_peak_rss_mb": round(p_rss, 1),
        "grep_c_mb_s": round(mb / grep_s, 1),
        "interpreter_baseline_rss_mb": round(base_rss, 1),
        "ratio_vs_python_lines": round(p_s / g_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000", help="comma-separated sizes in MB")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmpdir:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(size, tmpdir))
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }
    print(f"date {meta['date']}; machine {meta['machine']}; Python {meta['python']}")
    print("| log size | gpudoctor MB/s | peak RSS (MB) | Python line iteration MB/s | its peak RSS (MB) | grep -c MB/s | gpudoctor speed / Python lines speed | findings |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['size_mb']} MB | {r['gpudoctor_mb_s']} | {r['gpudoctor_peak_rss_mb']} | {r['python_lines_mb_s']} | "
            f"{r['python_lines_peak_rss_mb']} | {r['grep_c_mb_s']} | {r['ratio_vs_python_lines']} | {r['findings']} |"
        )
    print(f"(interpreter alone: {rows[0]['interpreter_baseline_rss_mb']} MB peak RSS)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
