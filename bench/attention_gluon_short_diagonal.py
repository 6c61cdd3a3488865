"""The Gluon forward's first consumer skipping the keys right of its rows in a causal tile's last
key block (attention_gluon.short_diagonal, forced on at every width here) against computing that
block whole, masked, with cuDNN beside them, on Hopper; the two settings take turns in one
process, rounds rotated. Each row says whether the shipped routing skips there.

Per shape: the largest difference between the two settings' outputs and log-sum-exps (only masked
keys' zeros leave the sums), then for the forward alone and for forward+backward through
flash_attention (its shipped routing): do_bench's median ms over the rounds and torch.profiler's
device µs a call (all kernels of the call), each as cuDNN's time / ours.

    PYTHONPATH=. python3 bench/attention_gluon_short_diagonal.py [--rounds 3] [--shapes hd64-s512 ...] [--out FILE]
"""

from __future__ import annotations

import statistics
import sys

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, dtype)
SHAPES = (
    ("hd40-s512", 32, 32, 32, 512, 40, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, "bf16"),
    ("hd64-s512-fp16", 32, 32, 32, 512, 64, "fp16"),
    ("hd64-gqa4-s512", 32, 32, 8, 512, 64, "bf16"),
    ("hd96-s512", 32, 32, 32, 512, 96, "bf16"),
    ("hd128-s512", 32, 32, 32, 512, 128, "bf16"),
    ("hd192-s512", 32, 32, 32, 512, 192, "bf16"),
    ("hd256-s512", 32, 32, 32, 512, 256, "bf16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, "bf16"),
    ("hd128-s1024", 16, 32, 32, 1024, 128, "bf16"),
    ("hd256-s1024", 16, 32, 32, 1024, 256, "bf16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, "bf16"),
    # second run: widths 32 and 192/256 at more lengths, width 64 at 1024-2048
    ("hd32-s512", 32, 32, 32, 512, 32, "bf16"),
    ("hd48-s1024", 16, 32, 32, 1024, 48, "bf16"),
    ("hd64-s2048", 8, 32, 32, 2048, 64, "bf16"),
    ("hd160-s512", 32, 32, 32, 512, 160, "bf16"),
    ("hd192-s1024", 16, 32, 32, 1024, 192, "bf16"),
    ("hd192-s4096", 4, 32, 32, 4096, 192, "bf16"),
    ("hd256-s4096", 4, 32, 32, 4096, 256, "bf16"),
    ("hd256-gqa4-s1024", 16, 32, 8, 1024, 256, "bf16"),
    ("hd256-s1024-fp16", 16, 32, 32, 1024, 256, "fp16"),
)


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, SHAPES):
        return 2
    import torch
    from attention_ab import hopper
    from attention_mid_calls import (_kernel_times, device_total, report_header, rotated_rounds, seeded_call,
                                     times_cudnn, write_report)

    from gpudoctor.kernels import attention_gluon, attention_plan
    from gpudoctor.kernels.attention import flash_attention

    if not hopper():
        return 2

    shipped_limits = dict(attention_gluon.SHORT_DIAGONAL_MAX_QUERIES)
    everywhere = dict.fromkeys(attention_gluon.BLOCK_N, 1 << 31)

    def setting(short):
        # short: at every width and length, whatever the shipped routing takes (short_diagonal).
        # A plan replays the launch it recorded whatever the setting now is, so a change of setting
        # forgets the plans (the eighteenth session's runs 1-2 did not: their f+b columns compare
        # one recording with itself).
        if attention_gluon.SHORT_DIAGONAL != short:
            attention_plan.forget()
        attention_gluon.SHORT_DIAGONAL = short
        attention_gluon.SHORT_DIAGONAL_MAX_QUERIES = everywhere if short else shipped_limits

    report = report_header(rounds=args.rounds, shipped_limits=shipped_limits, rows=[])
    print("causal; x = cuDNN's time / ours; fwd = forward alone, f+b = forward+backward (shipped routing)")
    print(f"{'shape':<16} {'fwd whole':>9} {'short':>7} {'x whole':>7} {'x short':>7} {'dev x w':>7} {'dev x s':>7}"
          f" | {'f+b whole':>9} {'short':>7} {'x whole':>7} {'x short':>7} {'dev x w':>7} {'dev x s':>7}  diff")
    for name, batch, heads, kv_heads, seq, head_dim, dtype_name in SHAPES:
        if args.shapes and name not in args.shapes:
            continue
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        q, k, v, grad, leaves, cudnn_forward, cudnn_both = seeded_call(batch, heads, kv_heads, seq, head_dim, dtype,
                                                                       True)
        scale = head_dim ** -0.5

        def forward(short):
            setting(short)
            return attention_gluon.attention_forward(q, k, v, True, scale)

        def both(short):
            setting(short)
            flash_attention(*leaves, causal=True).backward(grad)

        whole, short = forward(False), forward(True)
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "dtype": dtype_name,
               "bitwise_same": bool(torch.equal(whole[0], short[0]) and torch.equal(whole[1], short[1])),
               "max_out_diff": (whole[0].float() - short[0].float()).abs().max().item(),
               "max_lse_diff": (whole[1] - short[1]).abs().max().item()}
        runs = {"fwd_whole": lambda: forward(False), "fwd_short": lambda: forward(True), "fwd_cudnn": cudnn_forward,
                "both_whole": lambda: both(False), "both_short": lambda: both(True), "both_cudnn": cudnn_both}
        samples, _ = rotated_rounds(runs, args.rounds, leaves)
        row["do_bench_ms"] = {label: statistics.median(values) for label, values in samples.items()}
        row["rounds_ms"] = samples
        row["kernels_us"] = {label: _kernel_times(run) for label, run in runs.items()}
        row["device_us"] = {label: device_total(kernels) for label, kernels in row["kernels_us"].items()}
        attention_gluon.SHORT_DIAGONAL = True
        attention_gluon.SHORT_DIAGONAL_MAX_QUERIES = shipped_limits
        width = attention_gluon.forward_width(head_dim, seq, True)
        row["shipped_short"] = attention_gluon.short_diagonal(width, seq, True)
        ms, device = row["do_bench_ms"], row["device_us"]
        row["x_cudnn"], row["device_x_cudnn"] = times_cudnn(ms), times_cudnn(device)
        report["rows"].append(row)
        x, dx = row["x_cudnn"], row["device_x_cudnn"]
        print(f"{name:<16} {ms['fwd_whole']:9.3f} {ms['fwd_short']:7.3f} {x['fwd_whole']:7.2f} {x['fwd_short']:7.2f}"
              f" {dx.get('fwd_whole', 0):7.2f} {dx.get('fwd_short', 0):7.2f} | {ms['both_whole']:9.3f}"
              f" {ms['both_short']:7.3f} {x['both_whole']:7.2f} {x['both_short']:7.2f} {dx.get('both_whole', 0):7.2f}"
              f" {dx.get('both_short', 0):7.2f}  {'same' if row['bitwise_same'] else row['max_out_diff']}", flush=True)
        write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
