"""Where one forward+backward's host time goes at the training pass's shape (issue 18): timers
around the autograd Function, attention_backward and each FastLauncher launch, with the autograd
engine's device thread and without it (torch.autograd.set_multithreading_enabled(False)), and
attention_backward called directly. Run on a GPU: PYTHONPATH=. python3 bench/attention_host_breakdown.py
(docs/benchmarks.md, sixth session; bench/attention.py --host has the comparison with SDPA)."""
import time, torch, statistics
from gpudoctor.kernels import attention as A
q, k, v = (torch.randn(4, 32, 256, 80, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)
cfg = A.select_config((9, 0), 80, 256)
scale = 80 ** -0.5
with torch.no_grad():
    out, lse = A.attention_forward(q, k, v, True, scale, cfg)
spent = {"attention_backward": [], "Function.backward": [], "Function.forward": [], "fast.launch": []}
real_bwd = A.attention_backward
def timed_bwd(*a, **kw):
    t = time.perf_counter(); r = real_bwd(*a, **kw); spent["attention_backward"].append(time.perf_counter() - t); return r
A.attention_backward = timed_bwd
real_fn_bwd = A._FlashAttentionFunction.backward
real_fn_fwd = A._FlashAttentionFunction.forward
def fn_bwd(ctx, g):
    t = time.perf_counter(); r = real_fn_bwd(ctx, g); spent["Function.backward"].append(time.perf_counter() - t); return r
def fn_fwd(ctx, *a):
    t = time.perf_counter(); r = real_fn_fwd(ctx, *a); spent["Function.forward"].append(time.perf_counter() - t); return r
A._FlashAttentionFunction.backward = staticmethod(fn_bwd)
A._FlashAttentionFunction.forward = staticmethod(fn_fwd)
from gpudoctor.kernels import launch
real_launch = launch.FastLauncher.launch
def timed_launch(self, *a):
    t = time.perf_counter(); r = real_launch(self, *a); spent["fast.launch"].append((self.kernel.fn.__name__, time.perf_counter() - t)); return r
launch.FastLauncher.launch = timed_launch
def loop(fn, n=300):
    for key in spent: spent[key].clear()
    for _ in range(20): fn()
    torch.cuda.synchronize()
    for key in spent: spent[key].clear()
    t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize()
    total = (time.perf_counter() - t) / n * 1e6
    print(f"  total per iteration {total:.1f} us")
    for key, xs in spent.items():
        if not xs: continue
        if key == "fast.launch":
            by = {}
            for name, dt in xs: by.setdefault(name, []).append(dt)
            for name, ds in by.items(): print(f"  launch {name:40s} median {statistics.median(ds)*1e6:7.1f} us x{len(ds)//n}")
        else:
            print(f"  {key:47s} median {statistics.median(xs)*1e6:7.1f} us x{len(xs)//n}")
print("fwd+bwd through autograd:")
loop(lambda: A.flash_attention(q, k, v, causal=True).backward(g))
print("fwd+bwd, autograd on this thread:")
with torch.autograd.set_multithreading_enabled(False):
    loop(lambda: A.flash_attention(q, k, v, causal=True).backward(g))
print("attention_backward direct:")
loop(lambda: A.attention_backward(g, q.detach(), k.detach(), v.detach(), out, lse, True, scale, cfg))
print("fwd+bwd with q.grad reset each time:")
def reset():
    q.grad = k.grad = v.grad = None
    A.flash_attention(q, k, v, causal=True).backward(g)
loop(reset)
