"""Warm `gpudoctor check --train` beside `python -c "import torch, triton"`, in the same run.

The target (issue 18): the warm training pass within 3 s of what importing torch and triton alone
costs on the same machine. Both are timed as a user runs them (wall clock of the whole command,
interpreter start included), interleaved so that drift in the machine hits both alike. One run
first fills the Triton cache (not counted); `--full-matrix` also times the pass with every backend.

    python bench/train_pass.py --out bench/results/train-pass-h200.json [--repeats 5] [--full-matrix]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

IMPORT = [sys.executable, "-c", "import torch, triton"]


def check_train(preset: str, full_matrix: bool) -> list[str]:
    command = [sys.executable, "-m", "gpudoctor", "check", "--train", "--json", "--exit-zero"]
    return command + (["--preset", preset] if preset else [])


def timed(command: list[str], env: dict) -> dict:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    row = {"wall_s": round(wall, 3), "returncode": done.returncode}
    if "check" in command:
        try:
            train = json.loads(done.stdout)["train"]
            row["matrix"] = {cap: [{k: r.get(k) for k in ("backend", "status", "first_call_ms", "forward_ms",
                                                           "backward_ms", "notes")} for r in block["rows"]]
                             for cap, block in (train.get("matrix") or {}).items()}
            row.update(status=train.get("status"), child_wall_s=train["child"]["wall_s"],
                       timings_ms=train.get("timings_ms"),
                       stages_ms={s["id"]: s.get("duration_ms") for s in train.get("stages", [])},
                       stage_status={s["id"]: s.get("status") for s in train.get("stages", [])})
        except (ValueError, KeyError) as error:
            row["error"] = f"{type(error).__name__}: {error}; stderr tail: {done.stderr[-1500:]}"
    return row


BREAKDOWN = r"""
import json, time, torch
t0 = time.perf_counter()
def mark(label, box={}):
    torch.cuda.synchronize(); now = time.perf_counter(); box[label] = round((now - mark.last) * 1000, 1); mark.last = now; return box
mark.last = t0
torch.empty(1, device="cuda"); a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16); a @ a
times = mark("cuda_init_and_bf16_matmul")
from gpudoctor.kernels.attention import reference_attention, flash_attention
mark("import_kernels")
g = torch.Generator().manual_seed(0)
q, k, v, go = (torch.randn(4, 32, 256, 80, generator=g).to("cuda", torch.bfloat16) for _ in range(4))
mark("inputs_cpu_randn_to_gpu")
for dtype, name in ((torch.float64, "reference_float64"), (torch.float32, "reference_float32"), (torch.float64, "reference_float64_again")):
    leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    reference_attention(*leaves, causal=True, dtype=dtype).backward(go.to(dtype)); mark(name)
from torch.nn.attention import SDPBackend, sdpa_kernel
leaves = [t.clone().requires_grad_() for t in (q, k, v)]
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True).backward(go)
mark("sdpa_flash_first_fwd_bwd")
flash_attention(*leaves, causal=True).backward(go); mark("gpudoctor_first_fwd_bwd")
flash_attention(*leaves, causal=True).backward(go); mark("gpudoctor_second_fwd_bwd")
print(json.dumps(times))
"""


def attention_matrix_breakdown(env: dict) -> dict:
    """Where the attention matrix stage's fixed cost goes, in a fresh process like the child."""
    done = subprocess.run([sys.executable, "-c", BREAKDOWN], capture_output=True, text=True, env=env, timeout=300)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": done.stderr[-2000:]}


def environment() -> dict:
    import torch
    import triton

    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        driver = "unknown"
    return {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu_and_driver": driver, "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--preset", default=None, help="default: the pass's own default (phi2 on a GPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--full-matrix", action="store_true", help="also time GPUDOCTOR_TRAIN_MATRIX=full")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env.pop("GPUDOCTOR_TRAIN_MATRIX", None)
    report = {"environment": environment(), "fill_cache": timed(check_train(args.preset, False), env)}
    if args.full_matrix:
        full_env = dict(env, GPUDOCTOR_TRAIN_MATRIX="full")
        report["full_matrix_fill_cache"] = timed(check_train(args.preset, True), full_env)
    runs = {"import_torch_triton": [], "check_train": [], "check_train_full_matrix": []}
    for _ in range(args.repeats):
        runs["import_torch_triton"].append(timed(IMPORT, env))
        runs["check_train"].append(timed(check_train(args.preset, False), env))
        if args.full_matrix:
            runs["check_train_full_matrix"].append(timed(check_train(args.preset, True), full_env))
    report["runs"] = runs
    report["attention_matrix_breakdown_ms"] = attention_matrix_breakdown(env)
    medians = {name: statistics.median(r["wall_s"] for r in rows) for name, rows in runs.items() if rows}
    report["median_wall_s"] = medians
    report["check_train_minus_import_s"] = round(medians["check_train"] - medians["import_torch_triton"], 3)
    report["target"] = "check_train_minus_import_s <= 3.0"
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    for name, rows in runs.items():
        if rows:
            print(f"{name:<26} " + " ".join(f"{r['wall_s']:6.2f}" for r in rows) + f"   median {medians[name]:.2f} s")
    print(f"warm check --train minus import: {report['check_train_minus_import_s']:.2f} s (target <= 3.0)")
    print("attention matrix breakdown (ms):", json.dumps(report["attention_matrix_breakdown_ms"]))
    for row in runs["check_train"][-1:]:
        print("last warm pass matrix:", json.dumps(row.get("matrix"))[:1500])
        print("last warm pass:", json.dumps({k: row.get(k) for k in ("status", "child_wall_s", "timings_ms", "stages_ms")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
