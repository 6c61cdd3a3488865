"""Benchmark gpudoctor.preflight()'s cost to a training script's start (issue 3).

Each sample is a fresh interpreter, as a training script would be:
    reference:  python -c "pass"
    first call: python -c "import gpudoctor; gpudoctor.preflight(...)"  with an empty cache dir
    cached:     the same command again, the cache now warm
preflight's cost = median(command) - median(reference), all measured in the same run,
interleaved so drift hits every series alike. Checks run against this machine (LiveHost).

Usage: python bench/preflight.py [--runs 21] [--out bench/results/preflight.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

CALL = "import gpudoctor; gpudoctor.preflight(quiet=True, raise_on_error=False)"


def time_command(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    """Wall time of one command, in ms (its output discarded)."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def header() -> dict:
    """Date, machine and Python: the first keys of every preflight benchmark's result."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }


def report(result: dict, out: str | None) -> None:
    """Write the result (raw samples included) to ``out`` and print it without them."""
    if out:
        with open(out, "w") as handle:
            json.dump(result, handle, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k != "raw_ms"}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--out", default=None, help="write the raw numbers as JSON")
    parser.add_argument("--prelude", default="", help="Python run before the call (for experiments)")
    args = parser.parse_args()

    py = sys.executable
    series: dict[str, list[float]] = {"reference": [], "first": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        for run in range(args.runs):
            env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, f"cache{run}"), PYTHONDONTWRITEBYTECODE="")
            series["reference"].append(time_command([py, "-c", "pass"], env))
            call = f"{args.prelude}; {CALL}" if args.prelude else CALL
            series["first"].append(time_command([py, "-c", call], env))  # empty cache dir: a miss
            series["cached"].append(time_command([py, "-c", call], env))
    median = {name: statistics.median(values) for name, values in series.items()}
    result = {
        **header(),
        "runs": args.runs,
        "median_ms": {k: round(v, 2) for k, v in median.items()},
        "preflight_first_ms": round(median["first"] - median["reference"], 2),
        "preflight_cached_ms": round(median["cached"] - median["reference"], 2),
        "raw_ms": {k: [round(v, 2) for v in values] for k, values in series.items()},
    }
    report(result, args.out)


if __name__ == "__main__":
    main()
