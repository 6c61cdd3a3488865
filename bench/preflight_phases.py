"""Where preflight()'s first (uncached) call spends its time: a diagnostic for bench/preflight.py.

One fresh interpreter per sample (like a training script), printing: the import of the engine,
then each probe's start and duration inside diagnose() (probes run in parallel threads, so the
durations overlap), then the whole diagnose(). Also the import cost of the heavy modules alone,
each in its own fresh interpreter. Medians over --runs samples.

Usage: python bench/preflight_phases.py [--runs 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, time
t0 = time.perf_counter()
from gpudoctor import facts as facts_module
from gpudoctor.engine import diagnose
from gpudoctor.host.live import LiveHost
t1 = time.perf_counter()
spans = {}
original_get = facts_module.Facts.get
def timed_get(self, name):
    start = time.perf_counter()
    value = original_get(self, name)
    spans.setdefault(name, [1e3 * (start - t1), 1e3 * (time.perf_counter() - start)])
    return value
facts_module.Facts.get = timed_get
commands = []
original_run = LiveHost._run
def timed_run(self, argv, timeout, env):
    start = time.perf_counter()
    result = original_run(self, argv, timeout, env)
    commands.append([" ".join(map(str, argv))[:60], 1e3 * (start - t1), 1e3 * (time.perf_counter() - start)])
    return result
LiveHost._run = timed_run
host_calls = {}
for method in ("nvml", "distributions", "system", "link_test"):
    def wrap(original, method=method):
        def timed(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                host_calls[method] = [1e3 * (start - t1), 1e3 * (time.perf_counter() - start)]
        return timed
    setattr(LiveHost, method, wrap(getattr(LiveHost, method)))
diagnose(LiveHost())
t2 = time.perf_counter()
print(json.dumps({"import_ms": 1e3 * (t1 - t0), "diagnose_ms": 1e3 * (t2 - t1), "probes": spans,
                  "commands": commands, "host_calls": host_calls}))
"""

MODULES = ("psutil", "pynvml", "importlib.metadata", "distro", "packaging.version", "rich.console",
           "gpudoctor.model", "gpudoctor.engine")


def _import_ms(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(1e3 * (time.perf_counter() - t))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(done.stdout) if done.returncode == 0 else float("nan")  # not installed: nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args()
    samples = [json.loads(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                                         check=True).stdout) for _ in range(args.runs)]
    result = {
        "runs": args.runs,
        "import_ms": round(statistics.median(s["import_ms"] for s in samples), 1),
        "diagnose_ms": round(statistics.median(s["diagnose_ms"] for s in samples), 1),
        "probes_ms": {
            name: {"start": round(statistics.median(s["probes"][name][0] for s in samples), 1),
                   "duration": round(statistics.median(s["probes"][name][1] for s in samples), 1)}
            for name in samples[0]["probes"]
        },
        "module_import_ms": {m: round(statistics.median(_import_ms(m) for _ in range(args.runs)), 1) for m in MODULES},
    }
    result["last_sample_commands"] = samples[-1]["commands"]
    result["last_sample_host_calls"] = samples[-1]["host_calls"]
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=2)
    print(f"engine import {result['import_ms']} ms, diagnose {result['diagnose_ms']} ms")
    for name, span in sorted(result["probes_ms"].items(), key=lambda item: -item[1]["duration"]):
        print(f"  probe {name:14s} start {span['start']:6.1f}  duration {span['duration']:6.1f}")
    for name, (start, duration) in samples[-1]["host_calls"].items():
        print(f"  host.{name:14s} start {start:6.1f}  duration {duration:6.1f}   (last sample)")
    for argv, start, duration in samples[-1]["commands"]:
        print(f"  command start {start:6.1f}  duration {duration:6.1f}  {argv}")
    print("  imports alone: " + ", ".join(f"{m} {v}" for m, v in result["module_import_ms"].items()))


if __name__ == "__main__":
    main()
