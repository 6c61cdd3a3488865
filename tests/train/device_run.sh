#!/bin/bash
# The device-machine run behind docs/training-pass.md (issue 6). Writes results.tgz and times.txt
# under $OUT and prints a short table last. Each preset first with an empty TRITON_CACHE_DIR (cold),
# then again with the same directory (warm). FULL=1 adds the terminal rendering of the provoked
# failure and a --compile --peft run.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=110
RES=/tmp/train-results; mkdir -p $RES
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys,torch,triton,bitsandbytes,peft;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'bitsandbytes',bitsandbytes.__version__,'peft',peft.__version__)"; } > $RES/versions.txt 2>&1
timed() {  # name, command...: stdout -> name.out, stderr -> name.err, wall clock -> times.txt
  local name=$1; shift; local start=$(date +%s.%N)
  "$@" > $RES/$name.out 2> $RES/$name.err; local rc=$?
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($(date +%s.%N)-$start,2))")" >> $RES/times.txt
}
# phi2 (the default preset) cold, then warm twice; llama cold (fills its cache), then warm.
for run in phi2:cold phi2:warm phi2:warm2 llama:cold llama:warm; do
  preset=${run%%:*}; kind=${run#*:}
  [ $kind = cold ] && export TRITON_CACHE_DIR=$(mktemp -d)
  timed $preset-$kind python3 -m gpudoctor check --train --preset $preset --json --exit-zero
done
timed static-check python3 -m gpudoctor check --json --exit-zero
timed python-import-torch python3 -c "import torch"
# A provoked failure: CC pointing at a missing compiler, with a cold Triton cache.
export TRITON_CACHE_DIR=$(mktemp -d)
CC=/nonexistent timed provoked-cc python3 -m gpudoctor check --train --preset phi2 --json --exit-zero
if [ "${FULL:-0}" = 1 ]; then  # the terminal rendering and --compile --peft (not needed for timings)
  export TRITON_CACHE_DIR=$(mktemp -d)
  CC=/nonexistent timed provoked-cc-terminal python3 -m gpudoctor check --train --preset phi2
  unset TRITON_CACHE_DIR
  timed phi2-compile-peft python3 -m gpudoctor check --train --preset phi2 --compile --peft --json --exit-zero --train-timeout 400
fi
unset TRITON_CACHE_DIR
# Parallel workers: the GPU tests are bound by Triton compiles on the CPU (issue 18: 58 s for
# tests/kernels + tests/train with -n 12 on the H200 machine's 16 cores); each test has a timeout.
timed pytest-gpu python3 -m pytest -m gpu tests/train -q -p no:cacheprovider -n 4 --durations 10
timed train-pass-bench python3 bench/train_pass.py --out $RES/train-pass.json --repeats 3 --full-matrix
cp $RES/times.txt $OUT/times.txt
tar czf $OUT/results.tgz -C $RES .
python3 tests/train/device_summary.py $RES
