"""Scan speed (issue 17: >= 1,000 Python files/s): the whole ``scan_paths`` (walk, read, ast,
rules, findings with fixes) over (a) N copies of the seed training script, every one parsed and
every one with findings, and (b) a real tree of third-party Python (a site-packages directory).

    python bench/scan.py [--copies 2000] [--tree DIR] [--repeat 3]

Prints one JSON object; the best of --repeat runs counts (a cold page cache is not the scan)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from packaging.version import Version  # noqa: E402

from gpudoctor.scan import scan_paths  # noqa: E402
from gpudoctor.scan.changes import load_knowledge  # noqa: E402
from gpudoctor.scan.versions import Versions  # noqa: E402


def _best(paths, versions, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = scan_paths(paths, versions)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=2000)
    parser.add_argument("--tree", default=next((p for p in sys.path if p.endswith("site-packages")), ""))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    knowledge = load_knowledge()
    versions = Versions({"transformers": Version("4.46.0"), "trl": Version("0.12.0")}, knowledge.newest_known)
    seed = os.path.join(REPO, "fixtures", "scan", "unsloth_seed", "train.py")
    out = {"python": platform.python_version(), "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.copies):
            shutil.copyfile(seed, os.path.join(tmp, f"train_{i:05d}.py"))
        seconds, result = _best([tmp], versions, args.repeat)
        out["seed_copies"] = {"files": result.python_files, "findings": len(result.findings), "seconds": round(seconds, 4),
                              "files_per_s": round(result.python_files / seconds)}
    if args.tree and os.path.isdir(args.tree):
        seconds, result = _best([args.tree], versions, args.repeat)
        out["tree"] = {"path": args.tree, "python_files": result.python_files, "config_files": result.config_files,
                       "findings": len(result.findings), "seconds": round(seconds, 4),
                       "files_per_s": round((result.python_files + result.config_files) / seconds)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
