#!/bin/bash
cd "$(dirname "$0")"; export PYTHONPATH=$(pwd) PYTHONUNBUFFERED=1
mkdir -p $OUT/r
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/r/versions.txt 2>&1
timeout 300 python3 bench/attention_matrix.py --rounds 3 --warm-workers 8 --out $OUT/r/matrix-again.json --only train-hd80-s256-causal-bf16 hd40-s8192-full-gqa8-bf16 hd256-s512-causal-gqa8-bf16 hd48-s512-causal-gqa8-fp16 hd232-s4096-causal-gqa8-bf16 hd240-s8192-causal-fp16 hd256-s8192-causal-bf16 hd56-s512-full-fp16 hd232-s16384-causal-gqa8-fp16 hd248-s4096-causal-gqa4-fp16 hd88-s1024-causal-bf16 hd168-s8192-full-gqa4-bf16 hd72-s1024-causal-fp16 hd72-s512-full-bf16 > $OUT/r/matrix-again.txt 2>&1; echo "rc=$?" >> $OUT/r/matrix-again.txt
timeout 200 python3 bench/attention_gluon_key_blocks.py --rounds 5 --settings shipped n128 --shapes train-hd80-s256-c hd64-s512-c hd128-s512-c hd40-s512-c --out $OUT/r/key-blocks-run4.json > $OUT/r/key-blocks-run4.txt 2>&1
cd $OUT && tar czf results.tgz r && rm -rf r
