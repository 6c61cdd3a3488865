"""The first-use autotune for GPU families whose tiles were never measured here
(gpudoctor.kernels.attention_autotune). On the CPU the candidates run under Triton's interpreter,
so the selection, the cache file and the wiring into flash_attention are exercised for real; only
the timings mean nothing there."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from gpudoctor.kernels import attention
from gpudoctor.kernels import attention_autotune as autotune
from gpudoctor.kernels.attention import AttentionConfig, KernelTiles, flash_attention, reference_attention

GUESS = AttentionConfig(KernelTiles(128, 64, 4, 3), KernelTiles(32, 128, 4, 2), KernelTiles(128, 32, 8, 1))


@pytest.fixture(autouse=True)
def _fresh_memory(monkeypatch, tmp_path):
    monkeypatch.setattr(autotune, "_MEMORY", {})
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(autotune.ENV_SWITCH, raising=False)


def test_candidates_start_with_the_guess_and_stay_legal():
    options = autotune.candidates(GUESS)
    assert options[0] == GUESS and len(options) == len(set(options)) == 3
    fewer_stages, other_warps = options[1], options[2]
    assert fewer_stages.forward.num_stages == 2 and fewer_stages.backward_dq.num_stages == 1  # never below 1
    assert other_warps.forward.num_warps == 8 and other_warps.backward_dq.num_warps == 4
    for option in options:  # tile shapes unchanged: the causal split stays valid
        for kernel in ("forward", "backward_dkdv", "backward_dq"):
            old, new = getattr(GUESS, kernel), getattr(option, kernel)
            assert (old.block_m, old.block_n) == (new.block_m, new.block_n)


def test_fastest_skips_candidates_that_fail():
    options = autotune.candidates(GUESS)

    def time_ms(config):
        if config is options[0]:
            raise RuntimeError("out of resource: shared memory, Required: 240000, Hardware limit: 101376")
        return 2.0 if config is options[1] else 1.0

    best, results = autotune.fastest(options, time_ms)
    assert best is options[2]
    assert results[0].startswith("RuntimeError: out of resource") and results[1] == 2.0 and results[2] == 1.0
    assert autotune.fastest(options, lambda config: 1 / 0) == (None, {i: "ZeroDivisionError: division by zero"
                                                                      for i in range(3)})


def test_tuned_once_then_read_from_the_cache_file(tmp_path):
    calls = []

    def time_ms(config):
        calls.append(config)
        return 3.0 - len(calls)  # the last candidate is fastest

    chosen = autotune.tuned("key-a", GUESS, time_ms)
    assert chosen == autotune.candidates(GUESS)[-1] and len(calls) == 3
    data = json.loads(autotune.cache_path().read_text())
    assert data["key-a"]["config"] == dataclasses.asdict(chosen) and set(data["key-a"]["timings"]) == {"0", "1", "2"}
    # Same process: memory. Another process (memory empty): the file, no timing at all.
    assert autotune.tuned("key-a", GUESS, lambda config: pytest.fail("tuned again")) == chosen
    autotune._MEMORY.clear()
    assert autotune.tuned("key-a", GUESS, lambda config: pytest.fail("tuned again")) == chosen


def test_nothing_runs_keeps_the_guess_and_writes_nothing():
    assert autotune.tuned("key-b", GUESS, lambda config: 1 / 0) == GUESS
    assert not autotune.cache_path().exists()


def test_corrupt_cache_file_is_tuned_again():
    autotune.cache_path().parent.mkdir(parents=True, exist_ok=True)
    autotune.cache_path().write_text("{not json")
    assert autotune.tuned("key-c", GUESS, lambda config: 1.0) == GUESS
    assert "key-c" in json.loads(autotune.cache_path().read_text())


def test_switch_off(monkeypatch):
    monkeypatch.setenv(autotune.ENV_SWITCH, "0")
    assert not autotune.enabled()


def test_flash_attention_tunes_an_unmeasured_family_at_first_use(monkeypatch, device):
    """flash_attention on a (pretended) sm80 GPU: the sm80 tiles and their neighbours are timed on
    inputs of the caller's shape, the fastest is cached, and the result is still right."""
    if device != "cpu":
        pytest.skip("pretends to be an sm80 GPU through the interpreter")
    monkeypatch.setattr(attention, "_device_capability", lambda tensor: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "pretend A100")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 64, generator=generator).to(torch.float16) for _ in range(3))
    out = flash_attention(q, k, v, causal=True)
    expected = reference_attention(q, k, v, causal=True)
    assert ((out.double() - expected).norm() / expected.norm()).item() < 5e-3
    (entry,) = json.loads(autotune.cache_path().read_text()).values()
    assert len(entry["timings"]) == 3 and all(isinstance(t, float) for t in entry["timings"].values()), entry
    assert entry["config"] in [dataclasses.asdict(c) for c in autotune.candidates(attention.select_config((8, 0), 64))]
    # sm90 (measured here) is never tuned.
    monkeypatch.setattr(attention, "_device_capability", lambda tensor: (9, 0))
    monkeypatch.setattr(autotune, "tuned", lambda *args: pytest.fail("sm90 must not be tuned"))
    flash_attention(q, k, v, causal=True)


def test_cache_entries_round_trip_every_config_field():
    flipped = {field.name: not getattr(GUESS, field.name) for field in dataclasses.fields(GUESS)
               if isinstance(getattr(GUESS, field.name), bool)}
    assert {"split_head_dim", "atomic_dq", "fused_backward", "gluon_forward", "gluon_backward", "gluon_atomic_dq"} <= set(flipped)
    config = dataclasses.replace(GUESS, tma=attention.HOST_DESCRIPTORS, **flipped)
    assert autotune._from_json(json.loads(json.dumps(autotune._to_json(config)))) == config
