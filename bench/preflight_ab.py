"""A/B of preflight()'s first and cached call between source trees, sample by sample.

bench/preflight.py times one tree; comparing trees run after one another on a noisy machine
mixes the machine's drift into the difference. Here the variants alternate sample by sample
(in a random order per sample), each in a fresh interpreter importing gpudoctor from
its own tree (PYTHONPATH and the working directory), each with an empty cache dir for the first
call and the same dir again for the cached one. Reported: median and first quartile minus the
median of ``python -c pass`` measured in the same loop, and each variant's ratio to the first;
the same for the first call's CPU time (user + system, with the commands it ran).

With ``--call check`` the command is ``gpudoctor check --json`` instead (its Keep: 0.3 s), with
``--call check-terminal`` ``gpudoctor check`` (the terminal report), the "cached" series then
being a second check (check keeps no cache).

Usage: python bench/preflight_ab.py prev=.out/prev now=. [--runs 60] [--call preflight|check|check-terminal] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile

import subprocess
import time

from preflight import CALL, header, report, time_command  # bench/preflight.py, beside this file


def time_and_cpu(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall time and CPU time (user + system, the command and the children it waited for:
    wait4's rusage) of one command, in ms. CPU time is the work done, which a 2-core machine
    shared with other jobs measures more steadily than the wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv)
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


CALLS = {
    "preflight": CALL,
    "check": "import sys\nfrom gpudoctor.cli.main import main\nsys.exit(main(['check', '--json', '--exit-zero']))",
    # what a user types: the terminal report (rich), here not on a TTY
    "check-terminal": "import sys\nfrom gpudoctor.cli.main import main\nsys.exit(main(['check', '--exit-zero']))",
}


def timed_inside(code: str, path: str) -> str:
    """``code`` that also appends its own duration (ms, from before the import of gpudoctor to the
    end of the call) to ``path``: the cost without the interpreter's start, whose spread on a
    leased machine (quartiles 54-69 ms for ``python -c pass``) hides a few-ms difference."""
    return (f"import time as _t\n_s = _t.perf_counter()\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines())
            + f"finally:\n    open({path!r}, 'a').write(f'{{(_t.perf_counter() - _s) * 1e3}}\\n')\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=DIR: a source tree holding gpudoctor/")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--out", default=None, help="write the raw numbers as JSON")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-sample order")
    parser.add_argument("--call", choices=sorted(CALLS), default="preflight", help="what to time")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variants)
    variants = {name: os.path.abspath(path) for name, path in variants.items()}
    py = sys.executable
    first = {name: [] for name in variants}
    cached = {name: [] for name in variants}
    reference = []
    first_cpu = {name: [] for name in variants}
    reference_cpu = []
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        for run in range(args.runs):
            wall, cpu = time_and_cpu([py, "-c", "pass"], dict(os.environ), os.getcwd())
            reference.append(wall)
            reference_cpu.append(cpu)
            # a fresh random order per sample: alternating the order (A,B then B,A) still favoured
            # the variant named first by 7-12 % between two identical trees on the 2-core box
            names = rng.sample(list(variants), len(variants))
            for name in names:
                env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, f"{name}{run}"), PYTHONDONTWRITEBYTECODE="",
                           PYTHONPATH=variants[name])
                first_code = timed_inside(CALLS[args.call], os.path.join(tmp, f"inside-first-{name}"))
                cached_code = timed_inside(CALLS[args.call], os.path.join(tmp, f"inside-cached-{name}"))
                wall, cpu = time_and_cpu([py, "-c", first_code], env, variants[name])
                first[name].append(wall)
                first_cpu[name].append(cpu)
                cached[name].append(time_command([py, "-c", cached_code], env, variants[name]))
        inside = {kind: {name: [float(v) for v in open(os.path.join(tmp, f"inside-{kind}-{name}")).read().split()]
                         for name in variants} for kind in ("first", "cached")}
    ref = statistics.median(reference)

    def cost(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values) - ref, 2),
                "p25": round(statistics.quantiles(values, n=4)[0] - ref, 2)}

    ref_cpu = statistics.median(reference_cpu)
    summary = {name: {"first": cost(first[name]), "cached": cost(cached[name]),
                      "first_cpu": {"median": round(statistics.median(first_cpu[name]) - ref_cpu, 2),
                                    "p25": round(statistics.quantiles(first_cpu[name], n=4)[0] - ref_cpu, 2)}}
               for name in variants}
    base = next(iter(variants))
    ratios = {name: round(summary[name]["first"]["median"] / summary[base]["first"]["median"], 3) for name in variants}
    cpu_ratios = {name: round(summary[name]["first_cpu"]["median"] / summary[base]["first_cpu"]["median"], 3)
                  for name in variants}
    result = {
        **header(),
        "runs": args.runs,
        "call": args.call,
        "variants": variants,
        "reference_ms": round(ref, 2),
        "cost_ms": summary,
        f"first_call_ratio_to_{base}": ratios,
        f"first_call_cpu_ratio_to_{base}": cpu_ratios,
        # from the import of gpudoctor to the call's end, timed inside each process
        "inside_ms": {kind: {name: {"median": round(statistics.median(values), 2),
                                    "p25": round(statistics.quantiles(values, n=4)[0], 2)}
                             for name, values in series.items()} for kind, series in inside.items()},
        "raw_ms": {"reference": [round(v, 2) for v in reference],
                   "reference_cpu": [round(v, 2) for v in reference_cpu],
                   "first_cpu": {k: [round(v, 2) for v in vs] for k, vs in first_cpu.items()},
                   "first": {k: [round(v, 2) for v in vs] for k, vs in first.items()},
                   "cached": {k: [round(v, 2) for v in vs] for k, vs in cached.items()},
                   "inside": {kind: {k: [round(v, 2) for v in vs] for k, vs in series.items()}
                              for kind, series in inside.items()}},
    }
    report(result, args.out)


if __name__ == "__main__":
    main()
