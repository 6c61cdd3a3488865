"""How often the Gluon attention kernels compile over the calls of a job whose batches change shape
(dynamic padding: each batch padded to its longest sequence, a multiple of 8, and a smaller last
batch), shipped ("shape-free": integers unspecialized) and with Triton's default specialization
("specialized": attention_gluon_specialization's twins of the same kernels). In a fresh Triton
cache (removed after), each compile counted (Triton's compilation listener) is a real one, with
its seconds. Forward+backward through flash_attention, head_dim 128, 32 query heads on 8 KV heads, causal,
bf16, on Hopper.

    PYTHONPATH=. python3 bench/attention_gluon_recompiles.py [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

# (batch, padded length) of each step
CALLS = ((4, 512), (4, 1000), (4, 1024), (4, 776), (4, 1536), (4, 2040), (4, 2048), (4, 1288), (3, 1000),
         (1, 520))
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    # A cache of its own, set before any compile (Triton reads the variable at each lookup) and
    # removed after.
    with tempfile.TemporaryDirectory(prefix="gpudoctor-recompiles-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        return _measure(args.out)


def _measure(out: str | None) -> int:
    from attention_ab import hopper

    if not hopper():
        return 2
    import torch
    import triton
    from attention_gluon_specialization import KERNELS, make_apply
    from attention_mid_calls import report_header, seeded_call, write_report

    from gpudoctor.kernels import attention_plan
    from gpudoctor.kernels.attention import flash_attention

    names = {name for _, name in KERNELS}
    compiles = []

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        if not cache_hit and getattr(src, "name", None) in names:
            compiles.append((times.ir_initialization + sum(us for _, us in times.lowering_stages)
                             + times.store_results) / 1e6)

    triton.knobs.compilation.listener = listener
    apply = make_apply()
    report = report_header(calls=[list(call) for call in CALLS], heads=HEADS, kv_heads=KV_HEADS,
                           head_dim=HEAD_DIM, rows=[])
    print(f"{'setting':<12} {'compiles':>8} {'compile s':>9} {'wall s':>7}  compiles a call")
    for label in ("specialized", "shape-free"):
        apply(label)
        attention_plan.forget()
        compiles.clear()
        each, start = [], time.perf_counter()
        for batch, seq in CALLS:
            before = len(compiles)
            _, _, _, grad, leaves, _, _ = seeded_call(batch, HEADS, KV_HEADS, seq, HEAD_DIM, torch.bfloat16, True)
            flash_attention(*leaves, causal=True).backward(grad)
            torch.cuda.synchronize()
            each.append(len(compiles) - before)
        row = {"setting": label, "compiles": len(compiles), "compile_s": round(sum(compiles), 2),
               "wall_s": round(time.perf_counter() - start, 2), "compiles_each_call": each}
        report["rows"].append(row)
        print(f"{label:<12} {row['compiles']:>8} {row['compile_s']:>9} {row['wall_s']:>7}  {each}")
    apply(None)
    write_report(out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
