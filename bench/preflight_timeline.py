"""A timeline of one uncached ``preflight()`` call, as a training script makes it: when each
gpudoctor module (and each heavy stdlib/third-party one) finished importing, when each probe
and each subprocess ran, when preflight returned, and how long the interpreter took to exit.

It complements bench/preflight.py (which measures the cost) by showing the critical path.
Each sample is a fresh interpreter with an empty cache dir. Times are ms from the first line
of the script; "startup" is the parent's wall time minus the child's own timeline.

Usage: python bench/preflight_timeline.py [--runs 9] [--call preflight|check] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import time
T0 = time.perf_counter()
import atexit, json, os, sys, threading
from importlib.machinery import PathFinder

def ms():
    return round(1e3 * (time.perf_counter() - T0), 2)

events = []   # [label, start_ms, end_ms, thread]
WATCH = ("gpudoctor", "dataclasses", "typing", "tomllib", "concurrent", "logging", "pynvml", "psutil",
         "distro", "packaging", "subprocess", "threading", "json", "re", "inspect", "pathlib", "tempfile",
         "shlex", "platform", "ctypes", "importlib.metadata")

class TimingFinder:
    # Wraps the loader of watched modules so each import's own exec time is recorded.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if not (name in WATCH or name.startswith("gpudoctor.")):
            return None
        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, original = spec.loader, spec.loader.exec_module
        def exec_module(module, name=name, original=original):
            start = ms()
            try:
                original(module)
            finally:
                events.append(["import " + name, start, ms(), threading.current_thread().name])
            if name in AFTER_IMPORT:
                AFTER_IMPORT[name](module)
        loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, TimingFinder)

def instrument_facts(facts_module):
    original_get = facts_module.Facts.get
    def timed_get(self, name):
        start = ms()
        try:
            return original_get(self, name)
        finally:
            events.append(["probe " + name, start, ms(), threading.current_thread().name])
    facts_module.Facts.get = timed_get

def instrument_host(live_module):
    original_run = live_module.LiveHost._run
    def timed_run(self, argv, timeout, env):
        start = ms()
        try:
            return original_run(self, argv, timeout, env)
        finally:
            events.append(["run " + " ".join(map(str, argv))[:50], start, ms(), threading.current_thread().name])
    live_module.LiveHost._run = timed_run
    original_nvml = live_module.LiveHost.nvml
    def timed_nvml(self, *a, **k):
        start = ms()
        try:
            return original_nvml(self, *a, **k)
        finally:
            events.append(["host.nvml", start, ms(), threading.current_thread().name])
    live_module.LiveHost.nvml = timed_nvml

# Patched as they finish importing, so the call imports them itself, as in a training script.
AFTER_IMPORT = {"gpudoctor.facts": instrument_facts, "gpudoctor.host.live": instrument_host}
import gpudoctor

# imports done by the instrumentation itself are not part of the timeline
events.clear()
T_CALL = ms()
CALL_UNDER_TEST
T_RETURN = ms()
def report():
    print(json.dumps({"call": T_CALL, "return": T_RETURN, "exit": ms(), "events": events}), flush=True)
atexit.register(report)
"""


CALLS = {
    "preflight": "gpudoctor.preflight(quiet=True, raise_on_error=False)",
    # `gpudoctor check --json` as its console script runs it, its report kept off stdout
    "check": "import contextlib, io\nfrom gpudoctor.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    main(['check', '--json', '--exit-zero'])",
}


def _sample(env: dict[str, str], prelude: str, call: str = "preflight") -> dict:
    start = time.perf_counter()
    code = CHILD.replace("CALL_UNDER_TEST", CALLS[call]).replace("T0 = time.perf_counter()\n", "T0 = time.perf_counter()\n" + prelude + "\n", 1)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    wall = 1e3 * (time.perf_counter() - start)
    sample = json.loads(done.stdout.strip().splitlines()[-1])
    sample["wall"] = wall
    return sample


def _reference(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return 1e3 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--out")
    parser.add_argument("--prelude", default="", help="Python run first in the child (for experiments)")
    parser.add_argument("--call", choices=sorted(CALLS), default="preflight", help="what to time (default preflight)")
    args = parser.parse_args()
    samples, references = [], []
    with tempfile.TemporaryDirectory(prefix="gpudoctor-timeline-") as tmp:
        for run in range(args.runs):
            env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, f"cache{run}"))
            references.append(_reference(env))
            samples.append(_sample(env, args.prelude, args.call))
    med = statistics.median
    typical = sorted(samples, key=lambda s: s["return"] - s["call"])[len(samples) // 2]
    summary = {
        "runs": args.runs,
        "python_pass_ms": round(med(references), 1),
        "wall_ms": round(med(s["wall"] for s in samples), 1),
        "preflight_call_ms": round(med(s["return"] - s["call"] for s in samples), 1),
        "exit_after_return_ms": round(med(s["exit"] - s["return"] for s in samples), 1),
        "median_sample": typical,
    }
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(summary, handle, indent=2)
    print(f"python -c pass {summary['python_pass_ms']} ms; instrumented child wall {summary['wall_ms']} ms; "
          f"preflight() call {summary['preflight_call_ms']} ms; atexit after return {summary['exit_after_return_ms']} ms")
    print(f"median sample: call at {typical['call']} ms, returned at {typical['return']} ms")
    for label, start, end, thread in sorted(typical["events"], key=lambda e: e[1]):
        if end - start >= 0.5 or label.startswith(("probe", "run", "host")):
            print(f"  {start:7.1f} {end:7.1f} {end - start:6.1f}  {thread[:18]:18s} {label}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # `| head`: the results file is already written
        sys.stderr.close()
