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
# the kernel log's Xid lines, if this user can read them (the health checks do not read it yet)
{ timeout 10 dmesg 2>&1 | grep -i "xid" | head -20; echo "dmesg rc=${PIPESTATUS[0]}"; } > $R/xid.txt 2>&1
for run in "nproc2-train:--train" "nproc2-train-compile:--train --compile"; do
  name=${run%%:*}; flags=${run#*:}
  start=$(date +%s.%N); python3 -m gpudoctor check --nproc 2 --json --exit-zero $flags > $R/$name.json 2> $R/$name.err
  echo "$name rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N)-$start,2))")" >> $R/times.txt
done
start=$(date +%s.%N); python3 -m gpudoctor check --nproc 2 --train -v > $R/nproc2-train.txt 2>&1
echo "nproc2-train-text rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N)-$start,2))")" >> $R/times.txt
NCCL_P2P_DISABLE=1 python3 -m gpudoctor check --nproc 2 --nccl --json --exit-zero > $R/nproc2-p2p-disabled.json 2> $R/nproc2-p2p-disabled.err
python3 -m pytest -q -p no:cacheprovider tests/distributed > $R/pytest.txt 2>&1; echo "pytest rc=$?" >> $R/times.txt
tar czf $OUT/results.tgz -C $R .
cat $R/times.txt $R/xid.txt | cut -c1-400; tail -3 $R/pytest.txt
python3 -c "
import json
for n in ('nproc2-train','nproc2-p2p-disabled'):
    d=json.load(open('$R/'+n+'.json')); r=d['nccl']['ranks']['0']
    print(n, r.get('nccl_version'), r.get('transports'), [x['busbw_gbs'] for x in r['all_reduce']], [x['busbw_gbs'] for x in r['all_gather']], r.get('links'), [(c['id'],c['status'],c['reason'][:150]) for c in d['checks'] if c['id'] in ('nccl-bandwidth-low','ranks-differ','rank-unreachable','training-pass-diverged')])
"
python3 -c "
import json
for n in ('nproc2-train','nproc2-train-compile'):
    d=json.load(open('$R/'+n+'.json')); s=(d.get('train') or {}).get('summary') or {}
    print(n, s.get('fsdp_losses'), s.get('single_device_losses'), s.get('max_relative_loss_difference'), s.get('per_rank_peak_bytes'), s.get('single_device_peak_bytes'), s.get('graph_breaks'))
    for r,v in ((d.get('train') or {}).get('ranks') or {}).items(): print(' rank', r, v.get('error'), (v.get('stderr_tail') or '')[-600:])
"
tail -30 $R/nproc2-train.txt
