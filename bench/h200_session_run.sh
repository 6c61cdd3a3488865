#!/bin/bash
# One H200 lease for the startup benchmarks (issue 12's Keep) and the GPU test suite, in one
# command (device time is scarce). Variants for the preflight A/B, measured interleaved in this run:
#   prev   = 7266a42 (before the one-owner redesign), copied to .out/prev
#   nowold = this tree with hook._run_checks as it was before NVML started first (.out/nowold)
#   now    = this tree
# Results land in $OUT; a short table is printed last.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=110
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p $O
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__)"; } > $O/versions.txt 2>&1
python3 -m pip list 2>/dev/null | grep -iE "xdist|timeout" >> $O/versions.txt
python3 -m gpudoctor check --json --exit-zero > $O/check-now.json 2>/dev/null
for round in 1 2; do
  for v in prev nowold now; do
    dir=$R/.out/$v; [ $v = now ] && dir=$R
    (cd $dir && python3 $R/bench/preflight.py --runs 15 --out $O/preflight-$v-$round.json > /dev/null 2>&1)
  done
done
python3 bench/check_startup.py --runs 9 --out $O/check-startup.json > /dev/null 2>&1
python3 bench/preflight_timeline.py --runs 9 --out $O/preflight-timeline.json > $O/preflight-timeline.txt 2>&1
python3 bench/train_pass.py --repeats 3 --out $O/train-pass.json > $O/train-pass.txt 2>&1
timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -n 16 --durations=12 tests/train tests/kernels tests/distributed > $O/pytest-gpu.txt 2>&1; echo "pytest-gpu rc=$?" > $O/pytest-rc.txt
python3 - "$O" <<'PY'
import json, sys, glob, statistics
o = sys.argv[1]
print(open(f"{o}/versions.txt").read().strip())
rows = {}
for path in sorted(glob.glob(f"{o}/preflight-*-*.json")):
    d = json.load(open(path)); v = path.rsplit("/", 1)[1].split("-")[1]
    rows.setdefault(v, []).append((d["preflight_first_ms"], d["preflight_cached_ms"]))
for v, xs in rows.items():
    print(f"preflight {v:7s} first {[x[0] for x in xs]} cached {[x[1] for x in xs]}")
c = json.load(open(f"{o}/check-startup.json")); print("check-startup", {k: v for k, v in c.items() if k not in ("raw", "samples")})
PY
tail -4 $O/train-pass.txt; head -3 $O/preflight-timeline.txt; cat $O/pytest-rc.txt; tail -18 $O/pytest-gpu.txt
