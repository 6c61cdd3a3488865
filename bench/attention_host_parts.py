"""What each piece of one small attention call costs on the host (issue 18 item 1: the training
pass's shape, batch 4, 32 heads, seq 256, head_dim 80, is host-bound). Each piece is called alone
in a loop on the main thread (microseconds a call, median of rounds), beside the whole forward and
forward+backward of ours, SDPA-cuDNN's and SDPA-flash's in the same run. Run on a GPU:

    PYTHONPATH=. python3 bench/attention_host_parts.py [--out FILE] [--rounds 7] [--calls 400]

Pieces are timed back to back, so the GPU queue fills with the launched kernels' work where a
piece launches one: those rows are the host's cost only when the host is slower than the device
(it is at this shape: docs/benchmarks.md, sixth and eighth sessions).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from gpudoctor.kernels import attention as A
from gpudoctor.kernels import launch


def per_call_us(function, calls: int, rounds: int) -> float:
    for _ in range(20):
        function()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        begin = time.perf_counter()
        for _ in range(calls):
            function()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - begin) / calls * 1e6)
    return statistics.median(samples)


def parts(batch=4, heads=32, seq=256, head_dim=80, causal=True, calls=400, rounds=7) -> dict:
    make = lambda: torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True)
    q, k, v = make(), make(), make()
    grad = torch.randn_like(q)
    scale = head_dim ** -0.5
    capability = torch.cuda.get_device_capability()
    config = A.config_for(q, k)
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    with torch.no_grad():
        out, lse = A.attention_forward(qd, kd, vd, causal, scale, config)

    def ours():
        A.flash_attention(q, k, v, causal=causal).backward(grad)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            scaled_dot_product_attention(q, k, v, is_causal=causal).backward(grad)

    def flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            scaled_dot_product_attention(q, k, v, is_causal=causal).backward(grad)

    def flash_forward():
        with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            scaled_dot_product_attention(q, k, v, is_causal=causal)

    def ours_forward():
        with torch.no_grad():
            A.flash_attention(q, k, v, causal=causal)

    def cudnn_forward():
        with torch.no_grad(), sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            scaled_dot_product_attention(q, k, v, is_causal=causal)

    class Nothing(torch.autograd.Function):  # the autograd Function machinery alone
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    def nothing():
        Nothing.apply(q).backward(grad)

    def one_thread(function):
        def run():
            with torch.autograd.set_multithreading_enabled(False):
                function()
        return run

    forward_launcher = launch.fast(A._attention_forward_kernel)
    recorded = {}
    real_launch = launch.FastLauncher.launch

    def record(self, grid, args, kwargs):  # the arguments of one real launch per kernel
        recorded.setdefault(self.kernel.fn.__name__, (self, grid, args, kwargs))
        return real_launch(self, grid, args, kwargs)

    launch.FastLauncher.launch = record
    try:
        ours()
        torch.cuda.synchronize()
    finally:
        launch.FastLauncher.launch = real_launch
    timed = {
        "ours fwd+bwd (autograd device thread)": ours,
        "ours fwd+bwd (calling thread)": one_thread(ours),
        "cudnn fwd+bwd (autograd device thread)": cudnn,
        "cudnn fwd+bwd (calling thread)": one_thread(cudnn),
        "flash fwd+bwd (autograd device thread)": flash,
        "ours fwd (no grad)": ours_forward,
        "cudnn fwd (no grad)": cudnn_forward,
        "flash fwd (no grad)": flash_forward,
        "empty Function fwd+bwd (autograd device thread)": nothing,
        "validate_inputs": lambda: A.validate_inputs(q, k, v, causal, None),
        "_autotuned_or_guessed": lambda: A._autotuned_or_guessed(q, k, v, causal, scale, capability, head_dim),
        "usable_config": lambda: A.usable_config(config, q, k, v),
        "attention_forward (direct)": lambda: A.attention_forward(qd, kd, vd, causal, scale, config),
        "attention_backward (direct)": lambda: A.attention_backward(grad, qd, kd, vd, out, lse, causal, scale, config),
        "torch.empty_like": lambda: torch.empty_like(qd),
        "torch.empty (lse)": lambda: torch.empty((batch * heads, seq), device="cuda", dtype=torch.float32),
        "grad.contiguous()": lambda: grad.contiguous(),
        "torch.cuda.current_device": torch.cuda.current_device,
        "tensor.data_ptr": qd.data_ptr,
        "tensor.stride()": qd.stride,
    }
    for name, (launcher, grid, args, kwargs) in recorded.items():
        device = launch._driver.active.get_current_device()
        timed[f"launch {name} (FastLauncher)"] = lambda l=launcher, g=grid, a=args, kw=kwargs: l.launch(g, a, kw)
        timed[f"key {name}"] = lambda l=launcher, a=args, kw=kwargs, d=device: l.key(d, a, kw)
        entry = launcher._compiled.get(launcher.key(device, args, kwargs))
        if entry:
            compiled, trailing = entry
            stream = launch._driver.active.get_current_stream(device)

            def direct(c=compiled, t=trailing, g=grid, a=args, s=stream):
                c.run(g[0], g[1] if len(g) > 1 else 1, 1, s, c.function, c.packed_metadata,
                      None, None, None, *a, *t)
            timed[f"compiled.run {name} (no key)"] = direct
    del forward_launcher
    results = {}
    import triton.testing

    for name, function in (("ours fwd+bwd do_bench", ours), ("cudnn fwd+bwd do_bench", cudnn),
                           ("flash fwd+bwd do_bench", flash)):
        samples = [triton.testing.do_bench(function, warmup=25, rep=100, grad_to_none=[q, k, v],
                                           return_mode="median") * 1000 for _ in range(rounds)]
        results[name] = round(statistics.median(samples), 2)
        print(f"{name:58s} {results[name]:8.2f} us")
    for name, function in timed.items():
        results[name] = round(per_call_us(function, calls, rounds), 2)
        print(f"{name:58s} {results[name]:8.2f} us")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args(argv)
    results = parts(calls=args.calls, rounds=args.rounds)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                       "per_call_us": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
