"""`gpudoctor report` against `python -m torch.utils.collect_env`, in the same run (issue 13 item 9).

Each tool runs in a fresh interpreter, interleaved (report, collect_env, report, ...) so both see
the same machine load; wall time of the whole process, median and min over --runs. Writes JSON
with --out. Needs torch in the interpreter that runs this (collect_env imports it)."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "gpudoctor report": [sys.executable, "-m", "gpudoctor", "report"],
    "torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
}


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the page cache for both
        _once(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():
            times[name].append(_once(argv))
    result = {name: {"median_s": statistics.median(t), "min_s": min(t), "runs": t} for name, t in times.items()}
    ratio = result["torch.utils.collect_env"]["median_s"] / result["gpudoctor report"]["median_s"]
    result["speedup_median"] = ratio
    result["machine"] = {"platform": platform.platform(), "python": platform.python_version(), "cpus": __import__("os").cpu_count()}
    for name in COMMANDS:
        print(f"{name:<26} median {result[name]['median_s'] * 1000:8.1f} ms   min {result[name]['min_s'] * 1000:8.1f} ms")
    print(f"collect_env / report (median): {ratio:.1f}x")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
