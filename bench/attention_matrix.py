"""Issue 18 item 1's whole matrix, sampled: gpudoctor's attention against the best SDPA backend at
every head_dim that is a multiple of 8 from 32 to 256 and every length from 512 to 16384 keys.

Item 1 asks for >= 1.0x the best SDPA backend at every head_dim 32-256 (multiples of 8), 512-16k
keys, causal or not, MHA and GQA 4:1 and 8:1, bf16 and fp16, forward and forward+backward. All of
it is 29 x 6 x 2 x 3 x 2 calls, each timed twice (forward, forward+backward) against two or three
backends: about an hour of device time. So each (head_dim, length) cell gets one of the twelve
(causal, GQA, dtype) variants, in a rotation that gives every head_dim both masks and both dtypes
and every variant 14-15 cells (``cells``); ``--only`` times named cells again, with more rounds.

Shapes fill the GPU as bench/attention.py's do: batch x length = 16384 tokens, 32 query heads.
Times are triton.testing.do_bench medians (host time included, as a user's loop sees it), the
providers taking turns within each round. Before timing, ``--warm-workers`` processes make one
call of each cell on our side, so that the Triton and Gluon compiles (dozens of kernels) run in
parallel into the shared cache rather than inside the timing loop.

    python bench/attention_matrix.py --out bench/results/attention-matrix-h200.json [--part 1/2]
    python bench/attention_matrix.py --only hd72-s512-causal-gqa4-fp16 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass

HEAD_DIMS = tuple(range(32, 257, 8))
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS = 16384
HEADS = 32
# Causal fastest, then dtype, then the GQA ratio: six consecutive variants (one head_dim's six
# lengths) hold both masks and both dtypes.
VARIANTS = tuple((causal, dtype, kv_ratio) for kv_ratio in (1, 4, 8) for dtype in ("bf16", "fp16")
                 for causal in (True, False))
# The training pass's own call (gpudoctor check --train): item 1 asks for 1/1.2 of the best there.
TRAINING_CELL = ("train-hd80-s256-causal-bf16", 80, 256, 4, True, "bf16", 1)


@dataclass(frozen=True)
class Cell:
    name: str
    head_dim: int
    seq: int
    batch: int
    causal: bool
    dtype: str
    kv_ratio: int


def _cell(head_dim: int, seq: int, causal: bool, dtype: str, kv_ratio: int) -> Cell:
    gqa = f"-gqa{kv_ratio}" if kv_ratio > 1 else ""
    name = f"hd{head_dim}-s{seq}-{'causal' if causal else 'full'}{gqa}-{dtype}"
    return Cell(name, head_dim, seq, max(1, TOKENS // seq), causal, dtype, kv_ratio)


def cells() -> list[Cell]:
    """One cell per (head_dim, length), its variant rotating by 5 per head_dim (5 and 12 coprime:
    every starting variant comes round) and by 1 per length; the training pass's call last."""
    chosen = []
    for i, head_dim in enumerate(HEAD_DIMS):
        for j, seq in enumerate(SEQS):
            causal, dtype, kv_ratio = VARIANTS[(5 * i + j) % len(VARIANTS)]
            chosen.append(_cell(head_dim, seq, causal, dtype, kv_ratio))
    name, head_dim, seq, batch, causal, dtype, kv_ratio = TRAINING_CELL
    chosen.append(Cell(name, head_dim, seq, batch, causal, dtype, kv_ratio))
    return chosen


def _inputs(cell: Cell, mode: str):
    """q, k, v of the cell (bench/attention.py's make_inputs), seeded by head_dim and length."""
    import torch
    from attention import make_inputs

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[cell.dtype]
    return make_inputs(cell.batch, HEADS, HEADS // cell.kv_ratio, cell.seq, cell.head_dim, mode,
                       cell.head_dim * 100003 + cell.seq, dtype)


def _runner(provider: str, q, k, v, causal: bool, mode: str):
    """One call of ``provider`` (bench/attention.py's make_runner; gpudoctor's is its "triton")."""
    from attention import make_runner

    return make_runner("triton" if provider == "gpudoctor" else provider, q, k, v, causal, mode)


def warm(cell_names: list[str]) -> list[str]:
    """One forward and one forward+backward of gpudoctor's attention per cell (compiles into the
    shared Triton cache); the failures, as lines."""
    failures = []
    by_name = {cell.name: cell for cell in cells()}
    for name in cell_names:
        cell = by_name[name]
        for mode in ("fwd", "fwd+bwd"):
            try:
                q, k, v = _inputs(cell, mode)
                _runner("gpudoctor", q, k, v, cell.causal, mode)()
            except Exception as error:  # reported by the parent, and timed there anyway
                failures.append(f"{name} {mode}: {type(error).__name__}: {str(error)[:200]}")
    import torch

    torch.cuda.synchronize()
    return failures


def warm_in_parallel(chosen: list[Cell], workers: int) -> list[str]:
    import concurrent.futures
    import multiprocessing

    if workers < 1:
        return []
    # Largest calls first across workers so that no worker is left with all the long compiles.
    names = [cell.name for cell in chosen]
    slices = [names[index::workers] for index in range(workers)]
    context = multiprocessing.get_context("spawn")
    failures = []
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        for result in pool.map(warm, [part for part in slices if part]):
            failures += result
    return failures


def _error_against_sdpa(cell: Cell) -> float | str:
    """Relative error (Frobenius) of our forward against cuDNN's (flash's where cuDNN refuses)."""
    import torch

    q, k, v = _inputs(cell, "fwd")
    with torch.no_grad():
        ours = _runner("gpudoctor", q, k, v, cell.causal, "fwd")().float()
        for provider in ("sdpa-cudnn", "sdpa-flash"):
            try:
                theirs = _runner(provider, q, k, v, cell.causal, "fwd")().float()
            except RuntimeError:
                continue
            return ((ours - theirs).norm() / theirs.norm()).item()
    return "no SDPA backend ran"


def time_cell(cell: Cell, providers: list[str], rounds: int, warmup_ms: int, rep_ms: int) -> dict:
    import torch
    import triton.testing

    result = {**asdict(cell), "kv_heads": HEADS // cell.kv_ratio, "heads": HEADS}
    try:
        result["rel_err"] = _error_against_sdpa(cell)
    except Exception as error:  # a result, not a crash
        result["rel_err"] = f"{type(error).__name__}: {str(error)[:160]}"
    for mode in ("fwd", "fwd+bwd"):
        q, k, v = _inputs(cell, mode)
        runs, times, errors = {}, {provider: [] for provider in providers}, {}
        for provider in providers:
            try:
                runs[provider] = _runner(provider, q, k, v, cell.causal, mode)
                runs[provider]()
            except Exception as error:  # a backend refusing a shape is a result
                errors[provider] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        for _ in range(rounds):
            for provider, run in runs.items():
                times[provider].append(triton.testing.do_bench(
                    run, warmup=warmup_ms, rep=rep_ms, grad_to_none=[q, k, v], return_mode="median"))
        torch.cuda.synchronize()
        medians = {provider: statistics.median(values) for provider, values in times.items() if values}
        sdpa = {provider: ms for provider, ms in medians.items() if provider != "gpudoctor"}
        entry = {"ms": medians, "errors": errors}
        if "gpudoctor" in medians and sdpa:
            best = min(sdpa, key=sdpa.get)
            entry.update(best=best, ratio=sdpa[best] / medians["gpudoctor"])
        result[mode] = entry
        del q, k, v, runs
    return result


def summary_lines(results: list[dict]) -> list[str]:
    """The worst cells per mode, the share of cells at 1.0x or more, and each head_dim's worst."""
    lines = []
    for mode in ("fwd", "fwd+bwd"):
        rated = [(row[mode]["ratio"], row["name"]) for row in results
                 if "ratio" in row.get(mode, {}) and not row["name"].startswith("train")]
        if not rated:
            continue
        rated.sort()
        at_least = sum(ratio >= 1.0 for ratio, _ in rated)
        near = sum(ratio >= 0.95 for ratio, _ in rated)
        lines.append(f"{mode}: {at_least}/{len(rated)} cells >= 1.00x the best SDPA backend, "
                     f"{near}/{len(rated)} >= 0.95x; median {statistics.median(r for r, _ in rated):.2f}")
        lines += [f"  {ratio:5.2f}  {name}" for ratio, name in rated[:12]]
    by_head_dim: dict[int, dict[str, float]] = {}
    for row in results:
        if row["name"].startswith("train"):
            continue
        for mode in ("fwd", "fwd+bwd"):
            if "ratio" in row.get(mode, {}):
                worst = by_head_dim.setdefault(row["head_dim"], {})
                worst[mode] = min(worst.get(mode, 9.9), row[mode]["ratio"])
    if by_head_dim:
        lines.append("worst ratio per head_dim (fwd / fwd+bwd):")
        lines.append("  " + "  ".join(f"{hd}:{w.get('fwd', float('nan')):.2f}/{w.get('fwd+bwd', float('nan')):.2f}"
                                      for hd, w in sorted(by_head_dim.items())))
    for row in results:
        if row["name"].startswith("train") and "ratio" in row.get("fwd", {}):
            lines.append(f"training pass's call: fwd {row['fwd']['ratio']:.2f}x, "
                         f"fwd+bwd {row.get('fwd+bwd', {}).get('ratio', float('nan')):.2f}x the best "
                         "(item 1 asks >= 0.83)")
    return lines


def _part(text: str) -> tuple[int, int]:
    try:
        index, parts = (int(value) for value in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--part wants K/N, got {text!r}") from None
    if not 1 <= index <= parts:
        raise argparse.ArgumentTypeError(f"--part {text}: K must be 1..N")
    return index, parts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write every cell's result as JSON here")
    parser.add_argument("--part", type=_part, default=(1, 1), help="K/N: every N-th cell from the K-th")
    parser.add_argument("--only", nargs="*", help="these cells (names as printed) instead")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup-ms", type=int, default=10)
    parser.add_argument("--rep-ms", type=int, default=40)
    parser.add_argument("--warm-workers", type=int, default=12)
    parser.add_argument("--efficient", action="store_true", help="also time SDPA's memory-efficient backend")
    parser.add_argument("--list", action="store_true", help="print the cells and stop")
    args = parser.parse_args(argv)
    every = cells()
    known = {cell.name for cell in every}
    unknown = set(args.only or ()) - known
    if unknown:
        print(f"unknown cells: {sorted(unknown)} (--list prints them)", file=sys.stderr)
        return 2
    index, parts = args.part
    chosen = [cell for cell in every if cell.name in args.only] if args.only else every[index - 1::parts]
    if args.list:
        for cell in chosen:
            print(cell.name)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("bench/attention_matrix.py needs a CUDA GPU", file=sys.stderr)
        return 2
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from attention import environment

    env = environment()
    print(json.dumps(env), flush=True)
    failures = warm_in_parallel(chosen, min(args.warm_workers, len(chosen)))
    for line in failures:
        print(f"warm-up failed: {line}", flush=True)
    providers = ["gpudoctor", "sdpa-cudnn", "sdpa-flash"] + (["sdpa-efficient"] if args.efficient else [])
    results = []
    try:
        for cell in chosen:
            row = time_cell(cell, providers, args.rounds, args.warmup_ms, args.rep_ms)
            results.append(row)
            print(f"{cell.name:34s} fwd {row['fwd'].get('ratio', float('nan')):5.2f} "
                  f"({row['fwd'].get('best', '-')})  fwd+bwd {row['fwd+bwd'].get('ratio', float('nan')):5.2f} "
                  f"({row['fwd+bwd'].get('best', '-')})  err {row['rel_err']}", flush=True)
    finally:  # what was measured before a failure is still written
        if args.out:
            with open(args.out, "w") as handle:
                json.dump({"environment": env, "part": list(args.part), "rounds": args.rounds,
                           "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms,
                           "warm_failures": failures, "results": results}, handle, indent=1)
    print("\n".join(summary_lines(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
