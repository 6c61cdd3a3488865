#!/bin/bash
# One H200 lease for issue 12's Keep (preflight first call <= 100 ms, cached <= 5 ms, check <= 0.3 s),
# measured as same-lease A/B ratios because leases differ by +-30 %. Variants, sample by sample
# (bench/preflight_ab.py):
#   prev = 7266a42 (before the one-owner redesign), a git archive in .out/prev
#   s2   = f8bc4f3 (the previous session's last commit), a git archive in .out/s2
#   now  = this tree, or NOW=<dir> (a git archive of the commit to measure, so uncommitted edits in
#          the working tree are left out)
# Usage (device): [NOW=.out/head] bash bench/h200_preflight_ab.sh   (carry .out/prev, .out/s2 [and NOW]).
# Results in $OUT.
set -u
export PYTHONUNBUFFERED=1
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p $O; NOW=${NOW:-.}
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, pynvml; print('python', sys.version.split()[0], 'nvidia-ml-py', getattr(pynvml, '__version__', '?'))"; } > $O/versions.txt 2>&1
(cd $NOW && python3 -m gpudoctor check --json --exit-zero) > $O/check-now.json 2>/dev/null
python3 bench/preflight_ab.py prev=.out/prev s2=.out/s2 now=$NOW --runs 60 --out $O/preflight-ab.json > /dev/null 2>&1
(cd $NOW && python3 $R/bench/check_startup.py --runs 9 --out $O/check-startup.json) > /dev/null 2>&1
(cd $NOW && python3 $R/bench/preflight_timeline.py --runs 9 --out $O/preflight-timeline.json) > $O/preflight-timeline.txt 2>&1
python3 - "$O" <<'PY'
import json, sys
o = sys.argv[1]
print(open(f"{o}/versions.txt").read().strip())
d = json.load(open(f"{o}/preflight-ab.json"))
for name, cost in d["cost_ms"].items():
    print(f"preflight {name:5s} first {cost['first']['median']} (p25 {cost['first']['p25']}) cached {cost['cached']['median']} ms")
print("first-call ratio to prev", d["first_call_ratio_to_prev"])
c = json.load(open(f"{o}/check-startup.json")); print("check-startup", {k: v for k, v in c.items() if k not in ("raw", "samples", "raw_s")})
PY
head -2 $O/preflight-timeline.txt
