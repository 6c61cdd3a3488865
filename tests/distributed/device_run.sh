#!/bin/bash
# The 2-GPU device run behind docs/benchmarks.md's scale-out section (issue 16). Everything lands
# in $OUT/results.tgz; a short summary is printed last.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=110
R=/tmp/dist-results; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
  python3 -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'nccl',torch.cuda.nccl.version(),'gpus',torch.cuda.device_count())"
  nvidia-smi topo -m; env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort; } > $R/versions.txt 2>&1
python3 -m gpudoctor snapshot $R/snap --note "nvidia-h200-x2 device machine, as it is" > $R/snapshot.out 2>&1
python3 -m gpudoctor check --json --exit-zero > $R/check-single.json 2> $R/check-single.err
python3 -m gpudoctor check -v > $R/check-single.txt 2>&1
# NVML's session with and without the health queries (what the health checks add to `check`)
python3 - > $R/nvml-timing.txt 2>&1 <<'PY'
import time, statistics
from gpudoctor.host import live
from gpudoctor.host.base import NvmlHealth
def timed(n=7):
    out = []
    for _ in range(n):
        t = time.perf_counter(); info = live._query_nvml(); out.append((time.perf_counter() - t) * 1000)
    return out, info
with_health, info = timed()
real = live._health
live._health = lambda pynvml, handle, index: NvmlHealth(index)
without, _ = timed()
live._health = real
print("with health ms", [round(x, 2) for x in with_health], "median", round(statistics.median(with_health), 2))
print("without ms", [round(x, 2) for x in without], "median", round(statistics.median(without), 2))
print(info.health)
PY
for run in "nproc2-nccl:--nccl" "nproc2-train:--train"; do
  name=${run%%:*}; flags=${run#*:}
  start=$(date +%s.%N); python3 -m gpudoctor check --nproc 2 --json --exit-zero $flags > $R/$name.json 2> $R/$name.err
  echo "$name rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N)-$start,2))")" >> $R/times.txt
done
python3 -m gpudoctor check --nproc 2 --nccl -v > $R/nproc2-nccl.txt 2>&1; echo "nproc2-nccl-text rc=$?" >> $R/times.txt
NCCL_P2P_DISABLE=1 python3 -m gpudoctor check --nproc 2 --nccl > $R/nproc2-p2p-disabled.txt 2>&1; echo "p2p-disabled-text rc=$?" >> $R/times.txt
NCCL_P2P_DISABLE=1 python3 -m gpudoctor check --nproc 2 --nccl --json --exit-zero > $R/nproc2-p2p-disabled.json 2> $R/nproc2-p2p-disabled.err
# one rank given another environment, on the GPUs (torchrun passes one environment; this is two launches by hand)
python3 -m pytest -q -p no:cacheprovider tests/distributed > $R/pytest.txt 2>&1; echo "pytest rc=$?" >> $R/times.txt
tar czf $OUT/results.tgz -C $R .
cat $R/times.txt $R/nvml-timing.txt | cut -c1-400; tail -3 $R/pytest.txt
python3 -c "
import json
for n in ('nproc2-nccl','nproc2-p2p-disabled'):
    d=json.load(open('$R/'+n+'.json')); r=d['nccl']['ranks']['0']
    print(n, r.get('nccl_version'), r.get('transports'), [x['busbw_gbs'] for x in r['all_reduce']], [x['busbw_gbs'] for x in r['all_gather']], r.get('links'), [(c['id'],c['status'],c['reason'][:150]) for c in d['checks'] if c['id'] in ('nccl-bandwidth-low','ranks-differ','rank-unreachable','fsdp-pass')])
"
tail -25 $R/nproc2-nccl.txt
