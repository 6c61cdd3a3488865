"""Instructions executed by preflight()'s first call, per source tree: a CPU-cost measure that a
shared, noisy machine does not move.

Wall-time A/Bs (bench/preflight_ab.py) on the 2-core box moved by 4-12 % between two identical
trees; the instruction count of the same call under valgrind (cachegrind's ``I refs``, no cache
simulation, PYTHONHASHSEED fixed) repeats to within 0.1 %. It counts the Python process only (not
ldconfig, gcc or dmesg, which run beside it), all its threads together: the work done under the
GIL, which is what preflight's first call is bound by. It says nothing about overlap or waiting:
for those, bench/preflight_ab.py and bench/preflight_timeline.py.

Each tree is run once untimed first (it writes the bytecode cache), then --runs times, each with
an empty cache dir, like the first call of a training script. Needs valgrind.

Usage: python bench/preflight_instructions.py start=/tmp/pf-start now=. [--runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from preflight import CALL, header, report  # bench/preflight.py, beside this file

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(argv: list[str], env: dict[str, str], cwd: str) -> int:
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           *argv], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    match = _REFS.search(done.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {done.stderr[-500:]}")
    return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=DIR: a source tree holding gpudoctor/")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the raw numbers as JSON")
    args = parser.parse_args()
    variants = {name: os.path.abspath(path) for name, path in (v.split("=", 1) for v in args.variants)}
    py = sys.executable
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_env["PYTHONHASHSEED"] = "0"
    counts: dict[str, list[int]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        reference = instructions([py, "-c", "pass"], base_env, tmp)
        for name, tree in variants.items():
            for run in range(args.runs + 1):
                env = dict(base_env, PYTHONPATH=tree, XDG_CACHE_HOME=os.path.join(tmp, f"{name}{run}"))
                count = instructions([py, "-c", CALL], env, tree)
                if run:  # run 0 compiled the tree's bytecode
                    counts[name].append(count)
    cost = {name: round((statistics.median(c) - reference) / 1e6, 2) for name, c in counts.items()}
    base = next(iter(variants))
    result = {
        **header(),
        "runs": args.runs,
        "variants": variants,
        "python_pass_minstr": round(reference / 1e6, 2),
        "first_call_minstr": cost,
        f"ratio_to_{base}": {name: round(cost[name] / cost[base], 3) for name in variants},
        "raw_ms": {name: c for name, c in counts.items()},  # counts, under the key report() leaves out
    }
    report(result, args.out)


if __name__ == "__main__":
    main()
