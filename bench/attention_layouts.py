"""Which input layouts the attention kernels read correctly on this GPU, with the copy of unreadable layouts (guard) and without (noguard): one subprocess per case (an illegal memory access ends the CUDA context). PYTHONPATH=. python3 bench/attention_layouts.py OUT.json (docs/benchmarks.md, sixth session)."""
import json, subprocess, sys
CASE = r'''
import sys, torch
from gpudoctor.kernels import attention as A
case, guard = sys.argv[1], sys.argv[2] == "guard"
if not guard:
    A._readable = lambda t: t
torch.manual_seed(0)
B, H, S, D = 2, 8, 200, 80
def make():
    if case == "offset2":
        return torch.randn(B*H*S*D + 1, device="cuda", dtype=torch.float16)[1:].view(B, H, S, D)
    if case == "offset8":
        return torch.randn(B*H*S*D + 4, device="cuda", dtype=torch.float16)[4:].view(B, H, S, D)
    if case == "rowstride84":
        return torch.randn(B, H, S, 84, device="cuda", dtype=torch.float16)[..., :80]
    if case == "rowstride88":
        return torch.randn(B, H, S, 88, device="cuda", dtype=torch.float16)[..., :80]
    if case == "dstride":
        return torch.randn(B, H, D, S, device="cuda", dtype=torch.float16).transpose(-1, -2)
    if case == "bshd":
        return torch.randn(B, S, H, D, device="cuda", dtype=torch.float16).transpose(1, 2)
q, k, v = (make().requires_grad_() for _ in range(3))
g = torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
out = A.flash_attention(q, k, v, causal=True)
out.backward(g)
torch.cuda.synchronize()
leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
ref = A.reference_attention(*leaves, causal=True)
ref.backward(g.double())
err = lambda a, b: ((a.double() - b).norm() / b.norm()).item()
print(round(err(out.detach(), ref.detach()), 5), [round(err(t.grad, l.grad), 5) for t, l in zip((q, k, v), leaves)])
'''
rows = {}
for case in ("offset2", "offset8", "rowstride84", "rowstride88", "dstride", "bshd"):
    for guard in ("guard", "noguard"):
        r = subprocess.run([sys.executable, "-c", CASE, case, guard], capture_output=True, text=True, timeout=120)
        tail = (r.stdout.strip() or r.stderr.strip().splitlines()[-1] if (r.stdout.strip() or r.stderr.strip()) else "")[:160]
        rows[f"{case} {guard}"] = {"rc": r.returncode, "out": tail}
        print(f"{case:12s} {guard:8s} rc={r.returncode} {tail}", flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
