"""Measured the way the held-out evaluation measures: leave-one-thread-out (see loto.py)."""

from __future__ import annotations

import functools
from pathlib import Path

from loto import markdown_table, score

DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md"
ISSUE_15_RULES = ("nccl-timeout", "fp16-params-with-grad-scaler", "gradient-checkpointing-no-input-grads",
                  "bitsandbytes-triton-incompatible", "windows-dll-load-failed", "cuda-library-shadowed",
                  "python-headers-missing", "host-compiler-too-old", "xformers-abi-mismatch", "token-id-out-of-range",
                  "weights-offloaded-to-cpu", "peft-transformers-incompatible")


@functools.lru_cache(maxsize=None)
def _scores():
    return tuple(score())


@functools.lru_cache(maxsize=None)
def _strict_scores():
    return tuple(score(strict=True))


def test_every_fixture_is_diagnosed_with_every_signature():
    assert [s.rule for s in _scores() if s.in_sample != s.fixtures] == []


def test_new_rules_generalize_to_threads_they_were_not_written_for():
    # Each new family must carry every thread but (at most) the one its wording was first taken from.
    by_rule = {s.rule: s for s in _scores()}
    for rule in ISSUE_15_RULES:
        s = by_rule[rule]
        assert s.threads >= 3 and s.hits >= s.threads - 1, s


def test_held_out_score_does_not_fall_below_the_recorded_floor():
    # 313/314 when the table in docs/diagnosis.md was last written (2026-11-23, after the second held-out
    # round joined the fixtures; 245/246 after the first, 149/150 before it): the signatures whose wording
    # is a library's own message are never held out, so a miss here is a rule left with thread-only wordings.
    scores = _scores()
    hits, threads = sum(s.hits for s in scores), sum(s.threads for s in scores)
    assert hits / threads >= 0.97, f"{hits}/{threads}"


def test_strict_held_out_score_does_not_fall_below_the_recorded_floor():
    # 253/314 (80.6%) with every wording first read from the held-out thread removed too, 2026-11-23:
    # 188/246 on the threads before the second held-out round (107/150 before the first round, 81/96 on
    # it) and 65/68 on the second round, whose 3 misses are the wordings first read in them (issue 15's
    # first measurement, before the re-derivation, was 99/144); a signature fitted to one thread lowers it.
    scores = _strict_scores()
    hits, threads = sum(s.hits for s in scores), sum(s.threads for s in scores)
    assert hits / threads >= 0.78, f"{hits}/{threads}"


def test_a_held_out_rounds_threads_are_scored_alone():
    # loto.py --threads-from DIR: the figures docs/diagnosis.md gives for one round's threads
    from loto import thread_scores

    nccl_tests = "https://github.com/NVIDIA/nccl-tests/issues/15"  # its wordings were first read there
    assert thread_scores({nccl_tests}) == {"in-sample": (1, 1), "leave-one-thread-out": (1, 1), "strict": (0, 1)}
    assert thread_scores(set()) == {"in-sample": (0, 0), "leave-one-thread-out": (0, 0), "strict": (0, 0)}


def test_docs_show_the_current_table():
    assert markdown_table(list(_scores()), list(_strict_scores())) in DOCS.read_text(), \
        "regenerate: cd tests/logs && python loto.py --write-docs"
