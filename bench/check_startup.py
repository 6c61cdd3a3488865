"""Benchmark: `gpudoctor check` as a fresh process, against `python -m torch.utils.collect_env`
measured in the same run (the reference; a ratio survives noisy machines).

Usage: python bench/check_startup.py [--runs N] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def time_command(argv: list[str], runs: int) -> dict:
    samples = []
    rc = None
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
        rc = proc.returncode
    return {"argv": argv, "runs": runs, "median_s": statistics.median(samples), "min_s": min(samples),
            "max_s": max(samples), "returncode": rc}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args()
    py = sys.executable
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "python_startup": time_command([py, "-c", "pass"], args.runs),
        "gpudoctor_check": time_command([py, "-m", "gpudoctor", "check", "--exit-zero"], args.runs),
        "gpudoctor_check_json": time_command([py, "-m", "gpudoctor", "check", "--json", "--exit-zero"], args.runs),
    }
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except Exception:  # noqa: BLE001
        has_torch = False
    if has_torch:
        results["torch_collect_env"] = time_command([py, "-m", "torch.utils.collect_env"], max(3, args.runs // 2))
        results["ratio_collect_env_over_check"] = results["torch_collect_env"]["median_s"] / results["gpudoctor_check"]["median_s"]
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2)
    print("| command | median s | min s | max s |")
    print("| --- | --- | --- | --- |")
    for key in ("python_startup", "gpudoctor_check", "gpudoctor_check_json", "torch_collect_env"):
        if key in results:
            r = results[key]
            print(f"| {key} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['max_s']:.3f} |")
    if "ratio_collect_env_over_check" in results:
        print(f"collect_env / gpudoctor check = {results['ratio_collect_env_over_check']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
