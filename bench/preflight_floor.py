"""What bounds preflight()'s first call from below on this machine, measured in one run.

issue 12's Keep is an absolute figure (first call <= 100 ms on the H200), and leases differ: on
some, ``python -c pass`` alone takes 60-70 ms. This bench times the pieces no change inside
gpudoctor's import graph can remove, sample by sample in a random order:

- ``pass``: ``python -c pass``, the reference every preflight cost is taken against;
- ``pass -I -S``: the interpreter NVML's child process starts (host/nvml_query.py);
- ``nvml child``: that child as preflight starts it, from the spawn to its JSON answer (the end
  of its output) and to its exit; with the child's own split (``import pynvml``, ``nvmlInit``, the
  queries, in ms from its first line; and how long a normal exit takes after the answer);
- ``dataclasses``: creating N frozen dataclasses of five fields in a fresh interpreter (``import
  dataclasses`` then the classes, timed inside), N being what a healthy preflight creates
  (tests/test_preflight_import_cost.py lists them), beside the same number of NamedTuples.

Usage: PYTHONPATH=. python bench/preflight_floor.py [--runs 20] [--classes 38] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

from preflight import header  # bench/preflight.py, beside this file

CHILD_SPLIT = r"""
import time
t0 = time.perf_counter()
import json, sys
sys.path[:] = json.loads(sys.stdin.read())
import pynvml
t1 = time.perf_counter()
try:
    pynvml.nvmlInit()
except pynvml.NVMLError:  # no GPU here: the split still says what the import costs
    pass
t2 = time.perf_counter()
import importlib.util
spec = importlib.util.spec_from_file_location("nvml_query", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t3 = time.perf_counter()
answer = module.query()
t4 = time.perf_counter()
print(json.dumps({"import_pynvml": (t1 - t0) * 1e3, "nvml_init": (t2 - t1) * 1e3,
                  "query_after_init": (t4 - t3) * 1e3, "ok": answer.get("ok"), "answered_at": time.monotonic()}))
sys.stdout.flush()
"""

CLASSES = r"""
import time, sys
t0 = time.perf_counter()
kind = sys.argv[1]
if kind == "dataclass":
    import dataclasses
    for i in range(int(sys.argv[2])):
        exec(f'''
@dataclasses.dataclass(frozen=True)
class C{i}:
    "doc"
    a: int
    b: str = ""
    c: "int | None" = None
    d: bool = False
    e: tuple = ()
''', {"dataclasses": dataclasses})
else:
    import collections
    for i in range(int(sys.argv[2])):
        collections.namedtuple(f"N{i}", "a b c d e", defaults=("", None, False, ()))
print((time.perf_counter() - t0) * 1e3)
"""


def wall_ms(argv: list[str], stdin: bytes | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1000, done.stdout.decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--classes", type=int, default=38)
    parser.add_argument("--out")
    args = parser.parse_args()
    from gpudoctor.host import nvml_query

    py = sys.executable
    path = json.dumps(nvml_query._importable_path()).encode()
    script = nvml_query.__file__
    samples: dict[str, list[float]] = {}
    split: dict[str, list[float]] = {}

    def nvml_child() -> None:
        start = time.perf_counter()
        proc = nvml_query.spawn()
        out = proc.stdout.read()  # to the end of its output: the answer is in
        samples.setdefault("nvml child (spawn to answer)", []).append((time.perf_counter() - start) * 1000)
        proc.communicate(timeout=30)  # to its exit: what preflight waits for (it reads until the end)
        samples.setdefault("nvml child (spawn to exit)", []).append((time.perf_counter() - start) * 1000)
        json.loads(out)

    def child_split() -> None:
        _, out = wall_ms([py, "-I", "-S", "-c", CHILD_SPLIT, script], path)
        exited = time.monotonic()
        for key, value in json.loads(out).items():
            if key == "answered_at":  # the interpreter's finalization and NVML's teardown after the answer
                split.setdefault("exit after the answer (normal exit)", []).append((exited - value) * 1e3)
            elif key != "ok":
                split.setdefault(key, []).append(value)

    def classes(kind: str) -> None:
        _, out = wall_ms([py, "-I", "-S", "-c", CLASSES, kind, str(args.classes)])
        samples.setdefault(f"{args.classes} {kind} classes, inside", []).append(float(out))

    jobs = {
        "pass": lambda: samples.setdefault("python -c pass", []).append(wall_ms([py, "-c", "pass"])[0]),
        "pass -I -S": lambda: samples.setdefault("python -I -S -c pass", []).append(
            wall_ms([py, "-I", "-S", "-c", "pass"])[0]),
        "nvml child": nvml_child,
        "split": child_split,
        "dataclass": lambda: classes("dataclass"),
        "namedtuple": lambda: classes("namedtuple"),
    }
    rng = random.Random(0)
    for _ in range(args.runs):
        for name in rng.sample(list(jobs), len(jobs)):
            jobs[name]()
    medians = {key: round(statistics.median(values), 2) for key, values in {**samples, **split}.items()}
    result = {**header(), "runs": args.runs, "median_ms": medians, "raw_ms": {**samples, **split}}
    for key, value in medians.items():
        print(f"{key:40s} {value:8.2f} ms")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
