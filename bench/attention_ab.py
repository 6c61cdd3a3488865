"""The loop the Gluon forward's A/B benches share (attention_gluon_kv_stages, attention_gluon_pingpong):
per shape, the settings take turns in one process, rounds rotated, for do_bench and for the device
time alike (torch.profiler's kernel µs a call, median of the rounds: one setting measured after
another drifted by up to 8 % between identical kernels in the nineteenth session's run 2), cuDNN
beside them.

Per shape: whether the settings' outputs and log-sum-exps are bitwise equal, then for the forward
alone and (unless backward is off) forward+backward through flash_attention (shipped routing):
device µs, and cuDNN's time / ours by do_bench's median and by device time."""

from __future__ import annotations

import statistics
import sys
from typing import Callable

import torch
from attention_mid_calls import report_header, rotated_rounds, seeded_call, times_cudnn, write_report

from gpudoctor.kernels import attention_gluon, attention_plan
from gpudoctor.kernels.attention import flash_attention


def hopper() -> bool:
    """Whether this machine's GPU is a Hopper (sm90), which the Gluon forward needs; says so on
    stderr where not."""
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        return True
    print("needs a Hopper GPU (sm90)", file=sys.stderr)
    return False


def compare_settings(shapes, labels: list, apply: Callable, rounds: int, backward: bool = True,
                     out: str | None = None, only: list | None = None, **fields) -> dict:
    """Times the Gluon forward under each setting of ``labels`` at each of ``shapes`` ((name,
    batch, heads, kv_heads, seq, head_dim, causal, "bf16" or "fp16"); those named in ``only``
    where given). ``apply(label)`` puts a setting in place, ``apply(None)`` the shipped one. Prints
    a row a shape and returns (and writes to ``out``) the report, ``fields`` in its header."""
    current = [object()]

    def setting(label):
        # A plan replays the launch it recorded whatever the setting now is: a change forgets them.
        if current[0] != label:
            attention_plan.forget()
            current[0] = label
        apply(label)

    report = report_header(rounds=rounds, settings=labels, rows=[], **fields)
    print("x = cuDNN's time / ours (do_bench median | device); fwd = forward alone, f+b = forward+backward")
    for name, batch, heads, kv_heads, seq, head_dim, causal, dtype_name in shapes:
        if only and name not in only:
            continue
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        q, k, v, grad, leaves, cudnn_forward, cudnn_both = seeded_call(batch, heads, kv_heads, seq, head_dim, dtype,
                                                                       causal)
        scale = head_dim ** -0.5

        def forward(label):
            setting(label)
            return attention_gluon.attention_forward(q, k, v, causal, scale)

        def both(label):
            setting(label)
            flash_attention(*leaves, causal=causal).backward(grad)

        outputs = {label: forward(label) for label in labels}
        first = outputs[labels[0]]
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "causal": causal, "dtype": dtype_name,
               "bitwise_same": all(torch.equal(first[0], result[0]) and torch.equal(first[1], result[1])
                                   for result in outputs.values()),
               # each setting's output against the first's: where they are not bitwise the same
               "max_abs_diff": {label: (result[0].float() - first[0].float()).abs().max().item()
                                for label, result in outputs.items()}}
        runs = {f"fwd_{label}": (lambda label=label: forward(label)) for label in labels}
        runs["fwd_cudnn"] = cudnn_forward
        if backward:
            runs.update({f"both_{label}": (lambda label=label: both(label)) for label in labels})
            runs["both_cudnn"] = cudnn_both
        samples, device_samples = rotated_rounds(runs, rounds, leaves, device=True)
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
        write_report(out, report)
    return report
