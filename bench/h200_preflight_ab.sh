#!/bin/bash
# One H200 lease for issue 12's Keep (preflight first call <= 100 ms, cached <= 5 ms, check <= 0.3 s),
# measured as same-lease A/B ratios because leases differ by +-30 %. Variants, interleaved:
#   prev = 7266a42 (before the one-owner redesign), a git archive in .out/prev
#   s2   = f8bc4f3 (the previous session's last commit), a git archive in .out/s2
#   now  = this tree
# Usage (device): bash bench/h200_preflight_ab.sh   (carry .out/prev and .out/s2). Results in $OUT.
set -u
export PYTHONUNBUFFERED=1
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p $O
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, pynvml; print('python', sys.version.split()[0], 'nvidia-ml-py', getattr(pynvml, '__version__', '?'))"; } > $O/versions.txt 2>&1
python3 -m gpudoctor check --json --exit-zero > $O/check-now.json 2>/dev/null
for round in 1 2 3; do
  for v in prev s2 now; do
    dir=$R/.out/$v; [ $v = now ] && dir=$R
    (cd $dir && python3 $R/bench/preflight.py --runs 15 --out $O/preflight-$v-$round.json > /dev/null 2>&1)
  done
done
python3 bench/check_startup.py --runs 9 --out $O/check-startup.json > /dev/null 2>&1
python3 bench/preflight_timeline.py --runs 9 > $O/preflight-timeline.txt 2>&1
python3 - "$O" <<'PY'
import json, sys, glob
o = sys.argv[1]
print(open(f"{o}/versions.txt").read().strip())
rows = {}
for path in sorted(glob.glob(f"{o}/preflight-*-*.json")):
    d = json.load(open(path)); v = path.rsplit("/", 1)[1].split("-")[1]
    rows.setdefault(v, []).append((d["preflight_first_ms"], d["preflight_cached_ms"]))
for v, xs in rows.items():
    print(f"preflight {v:5s} first {[x[0] for x in xs]} cached {[x[1] for x in xs]}")
for r in range(len(rows["now"])):
    print(f"round {r + 1}: now/prev {rows['now'][r][0] / rows['prev'][r][0]:.2f}  now/s2 {rows['now'][r][0] / rows['s2'][r][0]:.2f}")
c = json.load(open(f"{o}/check-startup.json")); print("check-startup", {k: v for k, v in c.items() if k not in ("raw", "samples", "raw_s")})
PY
head -2 $O/preflight-timeline.txt
