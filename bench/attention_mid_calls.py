"""Forward+backward in mid-size training calls (2^26-2^28 scores, where until the sixteenth
session the shipped path paired the Gluon forward with the three-launch Triton backward), per
kernel: which kernel makes the shipped path slower than cuDNN, and whether it is the device or the
host (issue 18 item 1; the fourteenth session saw hd96/128 there at 0.52-0.94x of cuDNN with
rounds jumping 0.44-0.79 ms).

Per case, in rounds with the order rotated: do_bench's median, back to back (mean of 50) and the
host's time inside one call (median of those 50) of
  shipped        flash_attention as a user calls it
  triton-fwd     the same config with the Triton forward instead of the Gluon one
  gluon-bwd      (forward+backward) the same config with the Gluon dK/dV kernel summing dQ
  triton-bwd     (forward+backward) the same config with the Triton backward
  gluon-fwd      (small calls, which run the one-launch backward) with the Gluon forward
  unfused        (small calls) with the Gluon forward and the backward of larger calls
  long           (small calls) the config of calls with many scores (select_config without lengths)
  before         (where it differs) the config as routed before the twenty-ninth session
  cudnn          SDPA's cuDNN backend
then torch.profiler's device time per kernel for each (mean over 10 calls; their sum without
autograd's accumulation into .grad, and its ratio to cuDNN's, is the figure a fast host would
see where the device is the bound), and the host
cost of one Gluon forward (attention_gluon.attention_forward on a 1x1x512 call, host-bound) beside
the Triton forward's. Run on an sm90 GPU:

    PYTHONPATH=. python3 bench/attention_mid_calls.py [--out FILE] [--rounds 4] [--cases mid|backward|probe|routing]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from gpudoctor.kernels import attention as A
from gpudoctor.kernels import attention_gluon as G

# (head_dim, batch, heads, seq, causal): bench/attention.py's "4x" cases and two more; and the
# calls of 2^26-2^27 scores where the Gluon backward (gluon-bwd) was not taken before the sixteenth
# session (GLUON_MANY_SCORES).
CASE_SETS = {
    "mid": [(128, 4, 32, 1024, True), (96, 16, 32, 512, True), (128, 16, 32, 512, True),
            (96, 4, 32, 1024, True), (128, 8, 32, 1024, False), (64, 4, 32, 2048, True)],
    "backward": [(head_dim, batch, 32, seq, True) for head_dim in (96, 112, 128)
                 for batch, seq in ((2, 1024), (8, 512), (4, 1024), (16, 512))]
                + [(128, 4, 32, 1024, False), (72, 4, 32, 1024, True), (40, 4, 32, 1024, True)]
                + [(head_dim, 32, 32, 512, causal) for head_dim in (48, 56) for causal in (True, False)],
    "probe": [(112, 4, 32, 1024, True), (128, 4, 32, 1024, True)],
    # Where the Gluon backward should start (GLUON_MANY_SCORES) and where not (then GLUON_MANY_SCORES_NOT),
    # by device time: 2^26, 2^27 (two ways) and 2^28 scores, causal; two not causal.
    "routing": [(head_dim, batch, 32, seq, True) for head_dim in (40, 48, 56, 64, 72, 96, 112, 128)
                for batch, seq in ((2, 1024), (4, 1024), (16, 512), (32, 512))]
               + [(64, 4, 32, 1024, False), (128, 4, 32, 1024, False)],
    # After GLUON_MANY_SCORES moved to 2^26: 2^26 scores at 512 keys (not in "routing"), and the
    # head dims the Gluon backward takes for sharing a measured one's width.
    # Small calls (FUSED_BACKWARD_MAX_SCORES, and _WITH_GRAD at hd64/80) from 512 keys.
    "small": [(head_dim, 4, 32, 1024, causal) for head_dim in (64, 80) for causal in (True, False)]
             + [(head_dim, 16, 32, 512, True) for head_dim in (64, 80)]
             + [(head_dim, 4, 32, 512, True) for head_dim in (40, 64, 96, 128)] + [(128, 4, 32, 512, False)],
    # hd64 from 1024 keys past the one-launch backward's calls (GLUON_MANY_SCORES_MIN_SEQ_AT), once the
    # Gluon backward walked 128-query blocks there (seventeenth session).
    "wide64": [(64, batch, 32, 1024, causal) for batch in (8, 16) for causal in (True, False)]
              + [(64, 8, 32, 512, False), (56, 8, 32, 1024, True)],
    # The Gluon backward summing dQ replayed by a plan (attention_plan._SummingGluonBackward,
    # seventeenth session): calls it serves, and the one-launch band at hd64 (its "unfused").
    "plan": [(128, 2, 32, 1024, True), (128, 4, 32, 1024, False), (96, 2, 32, 1024, True), (40, 4, 32, 1024, True),
             (56, 16, 32, 512, True), (64, 8, 32, 1024, True), (64, 4, 32, 1024, True), (64, 4, 32, 1024, False),
             (64, 2, 32, 1024, True), (64, 2, 32, 1024, False), (80, 4, 32, 1024, True)],
    # Calls whose shipped backward is the Triton one, replayed by a plan since the seventeenth
    # session (attention_plan._LaunchesBackward): hd80 past the one-launch band (under 2048 keys
    # and 2^26 scores: elsewhere it sums dQ in the Gluon kernel since the thirty-first session; the
    # seventeenth measured 1024 keys at 2^28 scores and 2048 keys), hd32, and 2^25-2^26 scores at 48
    # heads.
    "plan3": [(80, 1, 16, 1536, True), (80, 1, 16, 1536, False), (80, 2, 8, 1536, True), (32, 4, 32, 2048, True),
              (96, 1, 48, 1024, True), (128, 1, 48, 1024, False)],
    # The 256 bucket (head_dim 136-256) at 512 keys, where its Gluon backward (GLUON_WIDE_MIN_SEQ)
    # had not been measured (eighteenth session): 2^26 and 2^28 scores.
    "wide512": [(head_dim, batch, 32, 512, causal) for head_dim in (160, 192, 256) for batch in (8, 32)
                for causal in (True, False)] + [(144, 32, 32, 512, True), (144, 8, 32, 512, True)],
    # The matrix's MHA cells at 512-1024 keys where forward+backward stayed under cuDNN (twenty-
    # seventh session, run 3: 0.93-0.98x) while GQA cells of the same lengths were >= 1.05x; and
    # two MHA neighbours that were level.
    "shortmha": [(56, 32, 32, 512, False), (72, 32, 32, 512, False), (72, 16, 32, 1024, True),
                 (88, 16, 32, 1024, True), (112, 32, 32, 512, True), (128, 32, 32, 512, True),
                 (64, 32, 32, 512, False), (128, 16, 32, 1024, False)],
    # Small calls (the one-launch backward, pointer kernels) at head dims the pointer kernels pad
    # to a power of two (40 -> 64, 72 -> 128, 136 -> 256; twenty-eighth session: 0.29-0.50x
    # cuDNN's device time), and controls that split (80) or need nothing (64, 128).
    "smallodd": [(72, 4, 32, 512, True), (40, 4, 32, 512, True), (104, 4, 32, 512, False), (56, 4, 32, 256, True),
                 (88, 8, 32, 256, True), (136, 4, 32, 512, True), (72, 1, 32, 512, True), (64, 4, 32, 512, True),
                 (80, 4, 32, 512, True), (128, 4, 32, 512, True)],
    # After them: calls of 2^25 scores and fewer at 1024 keys (the Triton kernels on descriptors
    # before), GQA-free MHA at 256 keys with more batch, fp16 is --dtype's.
    "smallodd2": [(72, 1, 32, 1024, True), (40, 1, 32, 1024, False), (120, 2, 16, 1024, True), (56, 16, 32, 256, True),
                  (72, 4, 32, 512, True), (152, 2, 32, 512, True)],
    # Small calls (the one-launch backward) at the head dims the pointer kernels run unpadded, where
    # only hd64/80/128 had been measured (twenty-eighth session: hd128 0.82x cuDNN's device time),
    # against the path larger calls take ("long": descriptors where needed, the Gluon forward and
    # backward); hd80 b4 s256 causal is the training pass's call.
    "smallpow": [(head_dim, batch, 32, seq, causal) for head_dim in (32, 48, 64, 80, 96, 128, 144, 160, 192, 256)
                 for batch, seq, causal in ((4, 512, True), (4, 512, False), (8, 256, True))]
                + [(80, 4, 32, 256, True), (96, 1, 32, 1024, True), (128, 1, 32, 1024, True),
                   (128, 2, 16, 1024, False), (256, 1, 32, 1024, True)],
    # After SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM (twenty-ninth session): small calls it moved, calls
    # at 256 keys past the small ones it moved too (the Triton kernels on pointers before), one
    # between 2^25 and 2^26 scores at 512 keys (the Triton backward before), and two it left: the
    # training pass's call and the llama preset's (hd128 b4 s256, 2^23 scores).
    "smallpow2": [(96, 8, 32, 256, True), (128, 4, 32, 512, True), (128, 4, 32, 512, False), (128, 8, 32, 256, True),
                  (160, 4, 32, 512, True), (256, 4, 32, 512, True), (256, 8, 32, 256, True),
                  (128, 32, 32, 256, True), (256, 32, 32, 256, True), (96, 64, 32, 256, False), (128, 6, 32, 512, True),
                  (80, 4, 32, 256, True), (128, 4, 32, 256, True)],
    # Calls of 2^27 scores at 256 keys, which the rule moved from 128 with nothing measured past
    # 2^26 there (a review's point, twenty-ninth session).
    "smallpow3": [(128, 64, 32, 256, True), (128, 64, 32, 256, False), (256, 64, 32, 256, False),
                  (192, 64, 32, 256, True)],
    "confirm": [(head_dim, 8, 32, 512, True) for head_dim in (40, 72, 96, 112, 128)]
               + [(128, 8, 32, 512, False)] + [(head_dim, 4, 32, 1024, True) for head_dim in (88, 104, 120)],
}
# Autograd's accumulation into the leaves' .grad (every provider alike), left out of device totals.
ACCUMULATE = "CUDAFunctor_add"


def _runners(q, k, v, grad, causal, mode):
    shipped = A.config_for(q, k, backward=mode == "fwd+bwd")
    triton_forward = dataclasses.replace(shipped, gluon_forward=False)
    # What calls of many scores take at this head_dim (small calls at padded head dims since the
    # twenty-eighth session): descriptors where the pointer kernels pad, the Gluon kernels.
    long_calls = A.select_config(torch.cuda.get_device_capability(q.device), q.shape[-1])

    def ours(config):
        def call():
            return A.flash_attention(q, k, v, causal=causal, config=config)
        return call

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)

    calls = {"shipped": ours(None), "triton-fwd": ours(triton_forward), "cudnn": cudnn}
    before = _routed_before_small_calls_long_path(q, k, mode == "fwd+bwd")
    if before != shipped:
        calls["before"] = ours(before)
    if mode == "fwd":
        if long_calls != shipped:
            calls["long"] = ours(long_calls)
        return {name: (lambda c=c: _no_grad(c)) for name, c in calls.items()}
    # The Gluon dK/dV kernel summing dQ (as from GLUON_MANY_SCORES), and the Triton backward
    calls["gluon-bwd"] = ours(dataclasses.replace(shipped, gluon_backward=True, gluon_atomic_dq=True))
    calls["triton-bwd"] = ours(dataclasses.replace(shipped, gluon_backward=False, gluon_atomic_dq=False))
    if shipped.fused_backward:  # a small call: the one-launch backward, and its alternatives
        calls["gluon-fwd"] = ours(dataclasses.replace(shipped, gluon_forward=True))
        calls["unfused"] = ours(dataclasses.replace(shipped, gluon_forward=True, fused_backward=False))
        calls["long"] = ours(long_calls)
    if A._pads_on_pointers(torch.cuda.get_device_capability(q.device), q.shape[-1]):
        # Head dims the pointer kernels pad (since the twenty-eighth session on descriptors and the
        # Gluon kernels from UNPADDED_GLUON_MIN_SEQ keys): before, small calls ran the one-launch
        # backward and the Triton forward on padded copies ("padded-fused"), calls from 1024 keys
        # the Triton kernels on descriptors with split tails, 72 = 64 + 16 ("triton-tma").
        calls["padded-fused"] = ours(dataclasses.replace(shipped, gluon_forward=False, gluon_backward=False,
                                                         gluon_atomic_dq=False, fused_backward=True, tma=A.POINTERS))
        calls["triton-tma"] = ours(dataclasses.replace(shipped, gluon_forward=False, gluon_backward=False,
                                                       gluon_atomic_dq=False, fused_backward=False,
                                                       tma=A.HOST_DESCRIPTORS))
    return {name: (lambda c=c: c().backward(grad)) for name, c in calls.items()}


def _routed_before_small_calls_long_path(q, k, backward: bool):
    """config_for as it routed before the twenty-ninth session: no head_dim takes the long calls'
    path for being wide (attention.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM past every one)."""
    shipped = A.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM
    A.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM = A.MAX_HEAD_DIM + 1
    try:
        return A.config_for(q, k, backward=backward)
    finally:
        A.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM = shipped


def _no_grad(call):
    with torch.no_grad():
        call()


def _back_to_back_ms(run, calls=50) -> tuple[float, float]:
    """(ms a call back to back, the median ms the host spent inside one call: the time to queue
    its work, the GPU's own time only where the launch queue was full)."""
    torch.cuda.synchronize()
    inside = []
    begin = time.perf_counter()
    for _ in range(calls):
        start = time.perf_counter()
        run()
        inside.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return (time.perf_counter() - begin) / calls * 1e3, statistics.median(inside) * 1e3


def _kernel_times(run, calls=10) -> dict:
    """Mean device µs per call of each kernel name (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    times: dict = {}
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if device_us and event.count >= calls:
            # summed: kernels whose names share the first 80 characters (two elementwise ones)
            times[event.key[:80]] = round(times.get(event.key[:80], 0) + device_us / calls, 1)
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def device_total(kernels: dict, only: str | None = None) -> float:
    """A call's device µs from _kernel_times: its kernels (those whose name holds ``only``, where
    given), without autograd's accumulation into .grad (ACCUMULATE), which every provider pays alike."""
    return round(sum(us for name, us in kernels.items() if ACCUMULATE not in name and (only is None or only in name)),
                 1)


def seeded_call(batch, heads, kv_heads, seq, head_dim, dtype, causal) -> tuple:
    """What the A/B benches (short_diagonal, kv_stages) time at one shape: (q, k, v, grad, leaves,
    cudnn_forward, cudnn_both), q/k/v and the incoming gradient seeded by seq + head_dim, leaves
    their copies requiring grad, and cuDNN's forward and forward+backward on them."""
    generator = torch.Generator(device="cuda").manual_seed(seq + head_dim)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype, generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dtype, generator=generator)
            for _ in range(2))
    grad = torch.randn(q.shape, device="cuda", dtype=dtype, generator=generator)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    gqa = heads != kv_heads

    def cudnn_forward():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
            scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def cudnn_both():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=gqa).backward(grad)

    return q, k, v, grad, leaves, cudnn_forward, cudnn_both


def rotated_rounds(runs: dict, rounds: int, leaves, device: bool = False) -> tuple[dict, dict]:
    """({label: do_bench's median ms, one a round}, {label: device µs (device_total), one a round,
    where ``device``, else empty}): the runs take turns in each round, the order rotated by one a
    round, so that a drifting clock falls on all of them alike (the A/B benches)."""
    samples = {label: [] for label in runs}
    device_samples = {label: [] for label in runs} if device else {}
    names = list(runs)
    for index in range(rounds):
        for label in names[index % len(names):] + names[:index % len(names)]:
            samples[label].append(triton.testing.do_bench(runs[label], warmup=25, rep=100, grad_to_none=leaves,
                                                          return_mode="median"))
            if device:
                device_samples[label].append(device_total(_kernel_times(runs[label])))
    return samples, device_samples


def times_cudnn(values: dict) -> dict:
    """{label: cuDNN's value / its own} for labels "<kind>_<setting>" beside "<kind>_cudnn" (kind
    fwd or both), leaving out labels with no value."""
    return {label: round(values[label.split("_")[0] + "_cudnn"] / value, 3) for label, value in values.items()
            if value}


def report_header(**fields) -> dict:
    """What a bench report begins with: the GPU, torch's and Triton's versions and the date (UTC),
    then ``fields`` (the attention benches importing this module share it)."""
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields}


def write_report(path: str | None, report: dict) -> None:
    """``report`` as JSON at ``path``; nothing where no --out was given."""
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=1)


def host_profile(run, calls=20) -> str:
    """cProfile of ``calls`` calls (after a warm-up): the host functions by own time."""
    import cProfile
    import io
    import pstats

    run()
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(14)
    return text.getvalue()


def case(head_dim, batch, heads, seq, causal, mode, rounds, profile=(), dtype=torch.bfloat16, providers=()) -> dict:
    shape = (batch, heads, seq, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn_like(q)
    runners = _runners(q, k, v, grad, causal, mode)
    if providers:
        runners = {name: run for name, run in runners.items() if name in providers or name == "cudnn"}
    for run in runners.values():
        run()
    samples: dict = {name: [] for name in runners}
    names = list(runners)
    for index in range(rounds):
        order = names[index % len(names):] + names[:index % len(names)]
        for name in order:
            run = runners[name]
            do_bench = triton.testing.do_bench(run, warmup=25, rep=100, grad_to_none=[q, k, v],
                                               return_mode="median")
            back_to_back, host = _back_to_back_ms(run)
            samples[name].append((round(do_bench, 4), round(back_to_back, 4), round(host, 4)))
    row = {"head_dim": head_dim, "batch": batch, "heads": heads, "seq": seq, "causal": causal, "mode": mode,
           "dtype": str(dtype).removeprefix("torch."),
           "rounds": samples,
           "do_bench_ms": {name: statistics.median(s[0] for s in runs) for name, runs in samples.items()},
           "host_ms": {name: statistics.median(s[2] for s in runs) for name, runs in samples.items()},
           "kernels_us": {name: _kernel_times(runners[name]) for name in runners}}
    row["device_us"] = {name: device_total(kernels) for name, kernels in row["kernels_us"].items()}
    row["profiles"] = {name: host_profile(runners[name]) for name in profile if name in runners}
    best = row["do_bench_ms"]["cudnn"]
    row["x_cudnn"] = {name: round(best / ms, 3) for name, ms in row["do_bench_ms"].items()}
    device_best = row["device_us"]["cudnn"]
    row["device_x_cudnn"] = {name: round(device_best / us, 3) for name, us in row["device_us"].items() if us}
    return row


def host_cost(calls=400, rounds=5) -> dict:
    """µs per call of pieces that are host-bound at 1x1x512, hd128."""
    q, k, v = (torch.randn(1, 1, 512, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = 128 ** -0.5
    triton_config = dataclasses.replace(A.config_for(q, k), gluon_forward=False)
    gluon_config = dataclasses.replace(A.config_for(q, k), gluon_forward=True)
    pieces = {
        "flash_attention no grad (Gluon forward)": lambda: _no_grad(
            lambda: A.flash_attention(q, k, v, config=gluon_config)),
        "flash_attention no grad (Triton forward)": lambda: _no_grad(
            lambda: A.flash_attention(q, k, v, config=triton_config)),
        "gluon attention_forward": lambda: G.attention_forward(q, k, v, True, scale),
        "triton attention_forward": lambda: A.attention_forward(q, k, v, True, scale, triton_config),
        "one host TMA descriptor (the Gluon backward's)": lambda: G._descriptor(q, 128, 128),
    }
    result = {}
    for name, piece in pieces.items():
        for _ in range(20):
            piece()
        values = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            begin = time.perf_counter()
            for _ in range(calls):
                piece()
            torch.cuda.synchronize()
            values.append((time.perf_counter() - begin) / calls * 1e6)
        result[name] = round(statistics.median(values), 2)
        print(f"host {name:40s} {result[name]:8.2f} us", flush=True)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--modes", nargs="+", default=["fwd+bwd", "fwd"])
    parser.add_argument("--cases", choices=sorted(CASE_SETS), default="mid")
    parser.add_argument("--profile", nargs="*", default=[], help="providers to cProfile at each case")
    parser.add_argument("--head-dims", nargs="*", type=int, help="only these head dims of the case set")
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    parser.add_argument("--providers", nargs="*", default=[], help="only these providers (and cudnn)")
    args = parser.parse_args(argv)
    report = report_header(host_us=host_cost(), cases=[])
    for mode in args.modes:
        for head_dim, batch, heads, seq, causal in CASE_SETS[args.cases]:
            if args.head_dims and head_dim not in args.head_dims:
                continue
            row = case(head_dim, batch, heads, seq, causal, mode, args.rounds, args.profile, getattr(torch, args.dtype),
                       args.providers)
            report["cases"].append(row)
            ms = row["do_bench_ms"]
            print(f"{mode:8s} {args.dtype[:4]} hd{head_dim:<4}b{batch:<3}s{seq:<5}{'causal' if causal else 'full':7s} "
                  + " ".join(f"{name} {value:.3f}" for name, value in ms.items())
                  + " | x cudnn " + " ".join(f"{n} {x:.2f}" for n, x in row["x_cudnn"].items())
                  + " | host ms " + " ".join(f"{n} {x:.3f}" for n, x in row["host_ms"].items())
                  + " | device us " + " ".join(f"{n} {x:.0f}" for n, x in row["device_us"].items())
                  + " | device x cudnn " + " ".join(f"{n} {x:.2f}" for n, x in row["device_x_cudnn"].items()),
                  flush=True)
            for name, kernels in row["kernels_us"].items():
                print(f"    {name}: " + ", ".join(f"{key[:40]} {us}" for key, us in list(kernels.items())[:5]))
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
