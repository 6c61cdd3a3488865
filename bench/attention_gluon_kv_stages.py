"""The Gluon forward with two, three and four slots in its K and V rings (attention_gluon.KV_STAGES)
at widths 32 and 64, cuDNN beside them, on Hopper; the settings take turns in one process, rounds
rotated, for do_bench and for the device time alike (torch.profiler's kernel µs a call, median of
the rounds: one setting measured after another drifted by up to 8 % between identical kernels in
the nineteenth session's run 2).

Per shape: whether the settings' outputs and log-sum-exps are bitwise equal, then for the forward
alone and (unless --no-backward) forward+backward through flash_attention (shipped routing): device
µs, and cuDNN's time / ours by do_bench's median and by device time.

    PYTHONPATH=. python3 bench/attention_gluon_kv_stages.py [--rounds 3] [--shapes hd64-s512-c ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores
SHAPES = (
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd40-s512", 32, 32, 32, 512, 40, False, "bf16"),
    ("hd32-s512-c", 32, 32, 32, 512, 32, True, "bf16"),
    ("hd48-s1024-c", 16, 32, 32, 1024, 48, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, False, "bf16"),
    ("hd32-s1024-c", 16, 32, 32, 1024, 32, True, "bf16"),
    ("hd64-s2048-c", 8, 32, 32, 2048, 64, True, "bf16"),
    ("hd64-s4096-c", 4, 32, 32, 4096, 64, True, "bf16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    ("hd32-s4096-c", 4, 32, 32, 4096, 32, True, "bf16"),
    ("hd64-gqa4-s512-c", 32, 32, 8, 512, 64, True, "bf16"),
    ("hd64-gqa8-s4096-c", 4, 32, 4, 4096, 64, True, "bf16"),
    ("hd64-s512-c-fp16", 32, 32, 32, 512, 64, True, "fp16"),
    ("hd64-s16384-c", 1, 32, 32, 16384, 64, True, "bf16"),
)
# KV_STAGES at every length: two slots (shipped before), three, four at widths 32 and 64.
SETTINGS = {"kv2": {}, "kv3": {32: 3, 64: 3}, "kv4": {32: 4, 64: 4}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", nargs="*", help=f"of {[shape[0] for shape in SHAPES]}")
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), help=f"of {list(SETTINGS)}")
    parser.add_argument("--no-backward", action="store_true", help="the forward alone")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    unknown = set(args.shapes or ()) - {shape[0] for shape in SHAPES} | set(args.settings) - set(SETTINGS)
    if unknown:
        print(f"unknown shapes or settings: {sorted(unknown)}", file=sys.stderr)
        return 2
    import torch
    from attention_mid_calls import report_header, rotated_rounds, seeded_call, times_cudnn, write_report

    from gpudoctor.kernels import attention_gluon, attention_plan
    from gpudoctor.kernels.attention import flash_attention

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs a Hopper GPU (sm90)", file=sys.stderr)
        return 2
    shipped = (dict(attention_gluon.KV_STAGES), dict(attention_gluon.KV_STAGES_MAX_KEYS),
               attention_gluon.KV_STAGES_MIN_HEAD_DIM)
    current = [None]

    def setting(name):
        # A setting holds at every length (name None: the shipped routing). A plan replays the
        # launch it recorded whatever the setting now is: a change forgets them.
        if current[0] != name:
            attention_plan.forget()
            current[0] = name
        forced = (SETTINGS[name], dict.fromkeys(attention_gluon.BLOCK_N, 1 << 31), 0) if name else shipped
        attention_gluon.KV_STAGES, attention_gluon.KV_STAGES_MAX_KEYS, attention_gluon.KV_STAGES_MIN_HEAD_DIM = forced

    report = report_header(rounds=args.rounds, settings=SETTINGS, shipped=list(shipped), rows=[])
    print("x = cuDNN's time / ours (do_bench median | device); fwd = forward alone, f+b = forward+backward")
    for name, batch, heads, kv_heads, seq, head_dim, causal, dtype_name in SHAPES:
        if args.shapes and name not in args.shapes:
            continue
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        q, k, v, grad, leaves, cudnn_forward, cudnn_both = seeded_call(batch, heads, kv_heads, seq, head_dim, dtype,
                                                                       causal)
        scale = head_dim ** -0.5

        def forward(name):
            setting(name)
            return attention_gluon.attention_forward(q, k, v, causal, scale)

        def both(name):
            setting(name)
            flash_attention(*leaves, causal=causal).backward(grad)

        outputs = {label: forward(label) for label in args.settings}
        first = outputs[args.settings[0]]
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "causal": causal, "dtype": dtype_name,
               "bitwise_same": all(torch.equal(first[0], out[0]) and torch.equal(first[1], out[1])
                                   for out in outputs.values())}
        runs = {f"fwd_{label}": (lambda label=label: forward(label)) for label in args.settings}
        runs["fwd_cudnn"] = cudnn_forward
        if not args.no_backward:
            runs.update({f"both_{label}": (lambda label=label: both(label)) for label in args.settings})
            runs["both_cudnn"] = cudnn_both
        samples, device_samples = rotated_rounds(runs, args.rounds, leaves, device=True)
        row["do_bench_ms"] = {label: statistics.median(values) for label, values in samples.items()}
        row["rounds_ms"] = samples
        row["device_rounds_us"] = device_samples
        row["device_us"] = {label: statistics.median(values) for label, values in device_samples.items()}
        setting(None)
        ms, device = row["do_bench_ms"], row["device_us"]
        row["x_cudnn"], row["device_x_cudnn"] = times_cudnn(ms), times_cudnn(device)
        report["rows"].append(row)
        x, dx = row["x_cudnn"], row["device_x_cudnn"]
        cells = "  ".join(f"{label} {device[label]:7.1f}us {x[label]:4.2f}|{dx.get(label, 0):4.2f}"
                          for label in runs if not label.endswith("cudnn"))
        print(f"{name:<18} same={row['bitwise_same']!s:<5} {cells}", flush=True)
        write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
