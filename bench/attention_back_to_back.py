"""The forward's device time a call when calls are queued back to back against calls with the GPU
idle between them (a sync and a 2 ms sleep after each), for gpudoctor's Gluon forward and cuDNN
alike, with the SM clock NVML reports meanwhile (its median): whether the thirty-seventh session's
run 15, where our kernels came out up to 10 % faster with gaps, is the static schedule's (ours
alone gains) or the clocks' (both gain, with higher clocks). Modes and providers take turns, the
order rotated each round. On Hopper.

    PYTHONPATH=. python3 bench/attention_back_to_back.py [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): run 15's calls and neighbours
SHAPES = (
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("hd256-s512-c", 32, 32, 32, 512, 256, True, "bf16"),
    ("hd64-s16384-c", 1, 32, 32, 16384, 64, True, "bf16"),
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, False, "bf16"),
)
CALLS = 20
GAP_S = 0.002


def _clock_sampler():
    """(start, stop -> median SM MHz or None): NVML's SM clock sampled every millisecond."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # no NVML: clocks not reported
        return (lambda: None), (lambda: None)
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            time.sleep(0.001)

    thread = threading.Thread(target=sample, daemon=True)

    def start():
        samples.clear()
        done.clear()
        nonlocal thread
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()

    def stop():
        done.set()
        thread.join()
        return statistics.median(samples) if samples else None

    return start, stop


def _device_us(run, gaps: bool, clock) -> tuple[float, float | None]:
    """Mean device µs of the call's kernels over CALLS calls (torch.profiler), and the median SM clock."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    start, stop = clock
    start()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            run()
            if gaps:
                torch.cuda.synchronize()
                time.sleep(GAP_S)
        torch.cuda.synchronize()
    mhz = stop()
    total = sum(getattr(event, "device_time_total", 0) or 0 for event in prof.key_averages()
                if event.count >= CALLS)
    return total / CALLS, mhz


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    import torch

    if not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9):
        print("needs a Hopper GPU (sm90)", file=sys.stderr)
        return 2
    from attention_mid_calls import report_header, seeded_call, write_report

    from gpudoctor.kernels import attention_gluon

    clock = _clock_sampler()
    report = report_header(rounds=args.rounds, calls=CALLS, gap_s=GAP_S, rows=[])
    print("device µs a call (median of rounds) and median SM MHz: back to back | with gaps")
    for name, batch, heads, kv_heads, seq, head_dim, causal, dtype_name in SHAPES:
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        q, k, v, _, _, cudnn_forward, _ = seeded_call(batch, heads, kv_heads, seq, head_dim, dtype, causal)
        runs = {"ours": lambda: attention_gluon.attention_forward(q, k, v, causal, head_dim ** -0.5),
                "cudnn": cudnn_forward}
        keys = [(provider, gaps) for provider in runs for gaps in (False, True)]
        samples = {key: [] for key in keys}
        for index in range(args.rounds):
            for provider, gaps in keys[index % len(keys):] + keys[:index % len(keys)]:
                samples[(provider, gaps)].append(_device_us(runs[provider], gaps, clock))
        row = {"shape": name}
        line = f"{name:16s}"
        for provider in runs:
            b2b = statistics.median(us for us, _ in samples[(provider, False)])
            gap = statistics.median(us for us, _ in samples[(provider, True)])
            clocks = [statistics.median([mhz for _, mhz in samples[(provider, gaps)] if mhz] or [0])
                      for gaps in (False, True)]
            row[provider] = {"back_to_back_us": round(b2b, 1), "gaps_us": round(gap, 1), "sm_mhz": clocks}
            line += (f"  {provider} {b2b:8.1f} | {gap:8.1f} µs ({gap / b2b - 1:+.1%})"
                     f" {clocks[0]:.0f} | {clocks[1]:.0f} MHz")
        print(line)
        report["rows"].append(row)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
