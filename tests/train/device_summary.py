"""Print the short table of a device run (tests/train/device_run.sh): wall times, the backend
matrix, the provoked failure's findings. Usage: python3 device_summary.py RESULTS_DIR"""

import json
import pathlib
import sys

res = pathlib.Path(sys.argv[1])
print((res / "versions.txt").read_text().strip())
print((res / "times.txt").read_text().strip())


def load(name):
    try:
        return json.loads((res / f"{name}.out").read_text())
    except (OSError, ValueError) as exc:
        err = res / f"{name}.err"
        print(f"{name}: no JSON ({exc}); stderr tail:", err.read_text()[-1500:] if err.exists() else "")
        return None


rows = []
for name in ("phi2-cold", "phi2-warm", "phi2-warm2", "llama-cold", "llama-warm", "phi2-compile-peft"):
    if not (res / f"{name}.out").exists():
        continue
    data = load(name)
    if not data:
        continue
    train = data["train"]
    rows.append((name, train["child"]["wall_s"], {"import": (train.get("timings_ms") or {}).get("import_torch_triton"),
                                                  **{s["id"]: s.get("duration_ms") for s in train.get("stages", [])}}))
    print(f"== {name}: status {train.get('status')} child {train['child']['wall_s']} s, timings {train.get('timings_ms')}")
    print("   findings:", [(f["id"], f["message"][:140]) for f in data["findings"] if f["severity"] == "error"])
    for stage in train.get("stages", []):
        print(f"   stage {stage['id']:<20} {stage['status']:<6} {stage.get('duration_ms')} ms {stage.get('problems') or ''}"
              f" {(stage.get('failure') or {}).get('message', '')}")
    print("   jit:", train.get("triton_jit"))
    t = train.get("training") or {}
    print("   build_model_ms", t.get("build_model_ms"), "checksum_ms", t.get("checksum_ms"), "step_ms", t.get("step_ms"))
    print("   losses:", t.get("losses"), "median step ms", t.get("median_step_ms"), "first-step overhead", t.get("first_step_overhead_ms"),
          "peak", t.get("peak_memory_bytes"))
    for cap, block in (train.get("matrix") or {}).items():
        for r in block["rows"]:
            print(f"   {cap:<9} {r['backend']:<19} {r['status']:<11} fwd {r['forward_ms']} bwd {r['backward_ms']} "
                  f"first {r['first_call_ms']} err {max(r['errors'].values()) if r['errors'] else ''} {r['reason'][:150]}")
            if r["backend"] == "bitsandbytes":
                print(f"      notes: {r['notes']}")
        print(f"   {cap} fastest: {block['fastest']}")
    if train.get("compile"):
        c = train["compile"]
        print("   compile:", {k: c.get(k) for k in ("graphs", "graph_breaks", "break_reasons", "backend", "compile_and_train_ms")},
              (c.get("training") or {}).get("losses"))
    if train.get("peft"):
        p = train["peft"]
        print("   peft:", p.get("peft_version"), (p.get("training") or {}).get("losses"), p.get("unsloth", {}).get("would_log"))
data = load("provoked-cc")
if data:
    for f in data["findings"]:
        print(f"   provoked: {f['id']} [{f['severity']}] {f['message'][:200]}")
        for fix in f["fixes"]:
            print(f"      fix ({fix['kind']}) {fix['summary'][:150]} {fix['commands']}")
if (res / "provoked-cc-terminal.out").exists():
    print((res / "provoked-cc-terminal.out").read_text()[-2500:])
print((res / "pytest-gpu.out").read_text()[-800:])
# The short table, last: whole-command wall time (times.txt) and the child's stages (ms).
walls = {line.split()[0]: line.split("wall_s=")[1] for line in (res / "times.txt").read_text().splitlines()}
stage_ids = ("import", "cuda-init", "triton-jit", "training", "attention-backends", "nf4-backends")
print(f"{'run':<12} {'wall s':>7} {'child s':>7} " + " ".join(f"{s[:12]:>12}" for s in stage_ids))
for name, child_s, stages in rows:
    print(f"{name:<12} {walls.get(name, '?'):>7} {child_s:>7} " + " ".join(f"{str(stages.get(s, '')):>12}" for s in stage_ids))
