"""A/B of preflight()'s first and cached call between source trees, sample by sample.

bench/preflight.py times one tree; comparing trees run after one another on a noisy machine
mixes the machine's drift into the difference. Here the variants alternate sample by sample
(in a random order per sample), each in a fresh interpreter importing gpudoctor from
its own tree (PYTHONPATH and the working directory), each with an empty cache dir for the first
call and the same dir again for the cached one. Reported: median and first quartile minus the
median of ``python -c pass`` measured in the same loop, and each variant's ratio to the first.

Usage: python bench/preflight_ab.py prev=.out/prev now=. [--runs 60] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile

from preflight import CALL, header, report, time_command  # bench/preflight.py, beside this file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=DIR: a source tree holding gpudoctor/")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--out", default=None, help="write the raw numbers as JSON")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-sample order")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variants)
    variants = {name: os.path.abspath(path) for name, path in variants.items()}
    py = sys.executable
    first = {name: [] for name in variants}
    cached = {name: [] for name in variants}
    reference = []
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        for run in range(args.runs):
            reference.append(time_command([py, "-c", "pass"]))
            # a fresh random order per sample: alternating the order (A,B then B,A) still favoured
            # the variant named first by 7-12 % between two identical trees on the 2-core box
            names = rng.sample(list(variants), len(variants))
            for name in names:
                env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, f"{name}{run}"), PYTHONDONTWRITEBYTECODE="",
                           PYTHONPATH=variants[name])
                first[name].append(time_command([py, "-c", CALL], env, variants[name]))
                cached[name].append(time_command([py, "-c", CALL], env, variants[name]))
    ref = statistics.median(reference)

    def cost(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values) - ref, 2),
                "p25": round(statistics.quantiles(values, n=4)[0] - ref, 2)}

    summary = {name: {"first": cost(first[name]), "cached": cost(cached[name])} for name in variants}
    base = next(iter(variants))
    ratios = {name: round(summary[name]["first"]["median"] / summary[base]["first"]["median"], 3) for name in variants}
    result = {
        **header(),
        "runs": args.runs,
        "variants": variants,
        "reference_ms": round(ref, 2),
        "cost_ms": summary,
        f"first_call_ratio_to_{base}": ratios,
        "raw_ms": {"reference": [round(v, 2) for v in reference],
                   "first": {k: [round(v, 2) for v in vs] for k, vs in first.items()},
                   "cached": {k: [round(v, 2) for v in vs] for k, vs in cached.items()}},
    }
    report(result, args.out)


if __name__ == "__main__":
    main()
