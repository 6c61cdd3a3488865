"""Plans (gpudoctor/kernels/attention_plan.py): a signature of flash_attention's inputs that ran
as one direct launch each way is replayed, with the same bits as the general path; anything that
changes a decision is another signature; a plan steps aside where the direct launch may not
serve. The logic on stand-ins (CPU), the replays on the GPU."""

from __future__ import annotations

import threading

import pytest
import torch

from gpudoctor.kernels import attention_plan, launch
from gpudoctor.kernels.attention import config_for, flash_attention, reference_attention, select_config


def _key(q, k, v, causal=True, softmax_scale=None, deterministic=False, config=None):
    return attention_plan.signature(q, k, v, causal, softmax_scale, deterministic, config)


def test_a_signature_holds_what_the_general_path_decides_by():
    q, k, v = (torch.zeros(2, 4, 32, 64) for _ in range(3))
    base = _key(q, k, v)
    assert base == _key(q.clone(), k.clone(), v.clone())  # other tensors, same signature
    buffer = torch.zeros(2 * 4 * 32 * 64 + 1)
    others = [
        _key(q.transpose(1, 2).contiguous().transpose(1, 2), k, v),  # strides
        _key(q.half(), k, v),  # dtype
        _key(buffer[1:].view(2, 4, 32, 64), k, v),  # 4 bytes past a 16-byte boundary
        _key(q[:, :, :16], k, v),  # shape
        _key(q, k[:, :2], v[:, :2]),  # grouped-query attention
        _key(q, k, v, causal=False),
        _key(q, k, v, causal=1),  # equal to True, but another type: validated on its own
        _key(q, k, v, softmax_scale=0.125),
        _key(q, k, v, deterministic=True),
        _key(q, k, v, config=select_config(None, 64)),  # a caller's own config
    ]
    assert _key(q, k, v, config=select_config(None, 64)) == others[-1]  # by value
    assert len({base, *others}) == len(others) + 1
    assert _key(torch.nn.Parameter(q), k, v) is None  # a subclass: never planned
    assert _key("q", k, v) is None


class _Replay:
    def __init__(self, leading, usable=True):
        self.leading, self.calls, self._usable = leading, [], usable

    def usable(self):
        return self._usable

    def __call__(self, *tensors):
        self.calls.append(tensors)


def _recorded(replay, *arguments):
    return launch.Recorded(replay, arguments)


@pytest.fixture
def no_plans():
    attention_plan.forget()
    yield
    attention_plan.forget()


def test_a_forward_on_the_callers_own_tensors_is_remembered(no_plans):
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    out, lse = torch.empty_like(q), torch.empty(2, 8)
    replay = _Replay(5)
    attention_plan.remember("key", "call", [_recorded(replay, q, k, v, out, lse, None, 3)], q, k, v, out)
    plan = attention_plan.find("key")
    assert plan is not None and plan.call == "call"
    q2 = torch.randn(1, 2, 8, 16)
    (saved, result) = plan.forward(q2, k, v)
    (launched,) = replay.calls
    assert launched[:3] == (q2, k, v) and launched[3] is result and saved[3] is result
    assert launched[4].shape == (2, 8) and launched[4].dtype == torch.float32 and saved[4] is launched[4]
    assert attention_plan.find(None) is None


@pytest.mark.parametrize("case", ["padded copy", "cut output", "two launches", "through triton", "other kernel"])
def test_a_forward_that_did_more_than_one_launch_on_the_inputs_is_not(no_plans, case):
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    out, lse = torch.empty_like(q), torch.empty(2, 8)
    launches = [_recorded(_Replay(5), q, k, v, out, lse)]
    result = out
    if case == "padded copy":
        launches = [_recorded(_Replay(5), q.clone(), k, v, out, lse)]
    elif case == "cut output":
        result = out[..., :8].contiguous()
    elif case == "two launches":
        launches = launches * 2
    elif case == "through triton":
        launches = [_recorded(None, q, k, v, out, lse)]
    elif case == "other kernel":
        launches = [_recorded(_Replay(4), q, k, v, out, lse)]
    attention_plan.remember("key", "call", launches, q, k, v, result)
    assert attention_plan.find("key") is None


def test_a_plan_steps_aside_when_its_launch_may_not_serve(no_plans):
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    out, lse = torch.empty_like(q), torch.empty(2, 8)
    attention_plan.remember("key", "call", [_recorded(_Replay(5, usable=False), q, k, v, out, lse)], q, k, v, out)
    assert attention_plan.find("key") is None


class _Call:
    """The general path's backward, launching a (stand-in) one-launch backward while recorded."""

    def __init__(self, replay, fused=True):
        self.replay, self.fused, self.backwards = replay, fused, 0

    def backward(self, grad_out, q, k, v, out, lse):
        self.backwards += 1
        grads = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        recorder = launch._RECORDER.get()
        if recorder is not None:
            arguments = (q, k, v, out, grad_out, *grads, lse) if self.fused else (q, k, v, out, grad_out.clone(), *grads, lse)
            recorder.append(launch.Recorded(self.replay, arguments))
        return grads


def _plan(call, monkeypatch):
    monkeypatch.setattr(launch, "fast_launch_enabled", lambda: True)
    return attention_plan.Plan(call, _Replay(5), (2, 8))


def test_the_one_launch_backward_is_replayed_after_the_first(monkeypatch):
    replay = _Replay(9)
    call = _Call(replay)
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16) for _ in range(5))
    lse = torch.empty(2, 8)
    plan.backward(grad, q, k, v, out, lse)
    assert call.backwards == 1 and plan.backward_replay.replay is replay
    grad2 = torch.randn(1, 2, 8, 16)
    dq, dk, dv = plan.backward(grad2, q, k, v, out, lse)
    assert call.backwards == 1
    (launched,) = replay.calls
    assert launched[:5] == (q, k, v, out, grad2) and launched[5:8] == (dq, dk, dv) and launched[8] is lse
    # An incoming gradient of another layout: the general path.
    plan.backward(torch.randn(1, 2, 16, 8).transpose(-1, -2), q, k, v, out, lse)
    assert call.backwards == 2 and len(replay.calls) == 1


def test_a_backward_that_copied_the_gradient_is_not_replayed(monkeypatch):
    call = _Call(_Replay(9), fused=False)
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16) for _ in range(5))
    lse = torch.empty(2, 8)
    for _ in range(3):
        plan.backward(grad, q, k, v, out, lse)
    assert call.backwards == 3 and plan.backward_replay is None


class _SummingCall:
    """The general path's backward as the Gluon backward summing dQ launches it (attention.
    attention_backward's gluon_dq path): the delta kernel on (out, grad_out, delta, dQ's float32
    sums, which it zeros), then the dK/dV kernel on descriptors of q, k, v, grad_out, dk, dv, then
    lse, delta and a descriptor of the sums; dq returned as the sums converted. ``tamper`` breaks
    one of those identities."""

    def __init__(self, tamper=None):
        self.delta, self.dkdv, self.tamper, self.backwards = _Replay(4), _Replay(9), tamper, 0

    def backward(self, grad_out, q, k, v, out, lse):
        self.backwards += 1
        delta = torch.empty_like(lse)
        launch.declare_scratch(delta)
        sums = torch.empty(q.numel() // q.shape[-1], q.shape[-1])
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        bases = [q, k, v, grad_out, dk, dv]
        if self.tamper == "padded q":  # _Call.backward padded the inputs: other tensors
            bases[0] = q.clone()
        descriptors = [launch.DescriptorArgument(t, list(t.shape), list(t.stride()), "zero") for t in bases]
        sums_descriptor = launch.DescriptorArgument(sums, list(sums.shape), list(sums.stride()), "zero")
        recorder = launch._RECORDER.get()
        if recorder is not None:
            # (with the sums zeroed by a fill kernel before, the delta kernel takes delta twice)
            zeroed = delta if self.tamper == "sums zeroed apart" else sums
            recorder.append(launch.Recorded(self.delta, (out, grad_out, delta, zeroed, 4, 8)))
            if self.tamper != "one launch":
                recorder.append(launch.Recorded(self.dkdv, (*descriptors, lse, delta, sums_descriptor, 8, 8)))
        return sums.view(q.shape).to(q.dtype), dk, dv


def test_the_gluon_backward_summing_dq_is_replayed_after_the_first(monkeypatch):
    call = _SummingCall()
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16, dtype=torch.bfloat16) for _ in range(5))
    lse = torch.empty(2, 8)
    plan.backward(grad, q, k, v, out, lse)
    assert call.backwards == 1 and isinstance(plan.backward_replay, attention_plan._SummingGluonBackward)
    # The plan holds no tensor: the descriptors' shapes, strides and padding only.
    assert all(template.base is None for template in plan.backward_replay.descriptors)
    grad2, q2 = torch.randn(1, 2, 8, 16, dtype=torch.bfloat16), q.clone()
    dq, dk, dv = plan.backward(grad2, q2, k, v, out, lse)
    assert call.backwards == 1
    (delta_call,), (dkdv_call,) = call.delta.calls, call.dkdv.calls  # the replays, once each
    assert delta_call[0] is out and delta_call[1] is grad2 and delta_call[2].shape == lse.shape
    assert delta_call[3] is dkdv_call[8].base  # the sums the delta kernel zeros are those summed into
    descriptors = dkdv_call[:6] + dkdv_call[8:9]
    assert all(d.base is t for d, t in zip(descriptors, (q2, k, v, grad2, dk, dv)))
    assert dkdv_call[6] is lse and dkdv_call[7] is delta_call[2]
    sums = descriptors[6].base
    assert sums.dtype == torch.float32 and sums.shape == (2 * 8, 16)
    assert [d.shape for d in descriptors] == [list(q.shape)] * 4 + [list(k.shape)] * 2 + [[16, 16]]
    assert dq.dtype == q.dtype and dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


@pytest.mark.parametrize("tamper", ["padded q", "one launch", "sums zeroed apart"])
def test_a_gluon_backward_on_other_tensors_is_not_replayed(monkeypatch, tamper):
    call = _SummingCall(tamper)
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16, dtype=torch.bfloat16) for _ in range(5))
    lse = torch.empty(2, 8)
    for _ in range(2):
        plan.backward(grad, q, k, v, out, lse)
    assert call.backwards == 2 and plan.backward_replay is None


class _ThreeLaunchCall:
    """The general path's backward as the Triton backward launches it: delta on (out, grad_out,
    delta, delta again: no sums to zero); dK/dV on q, k, v, grad_out, dk, dv, dk again (no dQ sums), lse, delta and host
    descriptors of q and k; dQ on q, k, v, grad_out, dq, lse, delta, out; delta declared scratch.
    ``tamper``: a padded copy of q, or a zeroed buffer shaped like delta but not declared scratch
    (a replay would make it uninitialised), where the replay could not make them."""

    def __init__(self, tamper=None):
        self.replays, self.tamper, self.backwards = (_Replay(4), _Replay(11), _Replay(8)), tamper, 0

    def backward(self, grad_out, q, k, v, out, lse):
        self.backwards += 1
        delta = torch.empty_like(lse)
        launch.declare_scratch(delta)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        kernel_q = q.clone() if self.tamper == "padded q" else q
        sums = torch.zeros_like(lse) if self.tamper == "a zeroed buffer" else dk
        descriptors = [launch.DescriptorArgument(t, [1, *t.shape[1:]], list(t.stride()), "zero") for t in (q, k)]
        arguments = ((out, grad_out, delta, delta, 4), (kernel_q, k, v, grad_out, dk, dv, sums, lse, delta, *descriptors, 8),
                     (q, k, v, grad_out, dq, lse, delta, out, 8))
        recorder = launch._RECORDER.get()
        if recorder is not None:
            for replay, launched in zip(self.replays, arguments):
                recorder.append(launch.Recorded(replay, launched))
        return dq, dk, dv


def test_the_triton_backward_of_three_launches_is_replayed_after_the_first(monkeypatch):
    call = _ThreeLaunchCall()
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16) for _ in range(5))
    lse = torch.empty(2, 8)
    plan.backward(grad, q, k, v, out, lse)
    assert isinstance(plan.backward_replay, attention_plan._LaunchesBackward)
    grad2, q2 = torch.randn(1, 2, 8, 16), q.clone()
    dq, dk, dv = plan.backward(grad2, q2, k, v, out, lse)
    assert call.backwards == 1
    (delta_call,), (dkdv_call,), (dq_call,) = (replay.calls for replay in call.replays)
    delta = delta_call[2]
    assert delta_call[:2] == (out, grad2) and delta.shape == lse.shape and delta.dtype == torch.float32
    assert all(a is b for a, b in zip(dkdv_call[:9], (q2, k, v, grad2, dk, dv, dk, lse, delta)))
    q_descriptor, k_descriptor = dkdv_call[9:]
    assert q_descriptor.base is q2 and k_descriptor.base is k and q_descriptor.shape == [1, 2, 8, 16]
    assert all(a is b for a, b in zip(dq_call, (q2, k, v, grad2, dq, lse, delta, out)))
    # The plan holds no tensor.
    held = [role[1] for _, roles in plan.backward_replay.steps for role in roles if type(role) is tuple]
    assert len(held) == 2 and all(template.base is None for template in held)
    # Saved tensors of another layout under the same plan (a saved-tensor hook unpacking them
    # contiguous): the general path, not the recorded strides.
    q3 = q.transpose(1, 2).contiguous().transpose(1, 2)
    plan.backward(grad2, q3, k, v, out, lse)
    assert call.backwards == 2 and len(call.replays[1].calls) == 1


@pytest.mark.parametrize("tamper", ["padded q", "a zeroed buffer", "aliased"])
def test_a_backward_on_tensors_a_replay_cannot_make_is_not_replayed(monkeypatch, tamper):
    call = _ThreeLaunchCall(tamper)
    plan = _plan(call, monkeypatch)
    q, k, v, out, grad = (torch.randn(1, 2, 8, 16) for _ in range(5))
    if tamper == "aliased":  # flash_attention(x, x, x): which of q, k, v a launch took is open
        k = v = q
    lse = torch.empty(2, 8)
    for _ in range(2):
        plan.backward(grad, q, k, v, out, lse)
    assert call.backwards == 2 and plan.backward_replay is None


# -- on the GPU: replays against the general path


def _inputs(shape, kv_heads, device, dtype=torch.bfloat16, seed=0):
    batch, heads, seq, head_dim = shape
    generator = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype, generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device=device, dtype=dtype, generator=generator)
            for _ in range(2))
    grad = torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype, generator=generator)
    return q, k, v, grad


def _forward_backward(q, k, v, grad, **options):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = flash_attention(q, k, v, **options)
    out.backward(grad)
    return out.detach(), q.grad, k.grad, v.grad


def _needs_gpu(device):
    if device != "cuda" or not launch._ENABLED:
        pytest.skip("plans replay direct launches: a GPU and a verified Triton")


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kv_heads, causal", [((4, 32, 256, 80), 32, True), ((2, 8, 200, 64), 2, True),
                                                     ((1, 4, 300, 128), 4, False)])
def test_gpu_a_planned_call_gives_the_general_paths_bits(device, no_plans, monkeypatch, shape, kv_heads, causal):
    """The training pass's shape and two beside it: the first call makes the plan, the second
    replays its forward and records its backward, later calls replay both (no FastLauncher
    launch at all where both ways were one launch), bit for bit the first."""
    _needs_gpu(device)
    q, k, v, grad = _inputs(shape, kv_heads, device)
    expected = _forward_backward(q, k, v, grad, causal=causal)
    plan = attention_plan.find((_key(q, k, v, causal=causal), True))  # keyed with "needs a backward"
    assert plan is not None
    assert all(torch.equal(a, b) for a, b in zip(_forward_backward(q, k, v, grad, causal=causal), expected))
    with torch.no_grad():  # a forward-only call is a signature of its own (it may take other kernels)
        assert torch.equal(flash_attention(q, k, v, causal=causal), expected[0])
    launches = []
    real = launch.FastLauncher.launch
    monkeypatch.setattr(launch.FastLauncher, "launch", lambda self, *a: launches.append(a) or real(self, *a))
    for _ in range(2):
        got = _forward_backward(q.clone(), k.clone(), v.clone(), grad.clone(), causal=causal)
        assert all(torch.equal(a, b) for a, b in zip(got, expected))
        with torch.no_grad():
            assert torch.equal(flash_attention(q, k, v, causal=causal), expected[0])
    if plan.backward_replay is not None:
        assert launches == []
    else:  # a backward of several launches (off sm90: no one-launch backward) stays general
        assert torch.cuda.get_device_capability()[0] != 9


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kv_heads, causal", [((2, 8, 2048, 128), 8, True), ((1, 8, 2048, 64), 2, False),
                                                     ((1, 4, 1100, 256), 2, True), ((1, 4, 2100, 112), 4, True)])
def test_gpu_the_gluon_backward_summing_dq_is_planned(device, no_plans, monkeypatch, shape, kv_heads, causal):
    """Calls whose shipped backward is the Gluon dK/dV kernel summing dQ (widths 128, 64 with its
    128-query blocks, the wide kernel at 256; GQA; a ragged length): from the third call no
    FastLauncher launch either way, dK and dV bit for bit the general path's, dQ within its
    run-to-run variation (the reduce-adds' order), all against float32."""
    _needs_gpu(device)
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon backward runs on sm90")
    q, k, v, grad = _inputs(shape, kv_heads, device)
    assert config_for(q, k, backward=True).gluon_atomic_dq
    expected = _forward_backward(q, k, v, grad, causal=causal)  # the general path; the plan made
    plan = attention_plan.find((_key(q, k, v, causal=causal), True))
    assert plan is not None
    _forward_backward(q, k, v, grad, causal=causal)  # its backward recorded
    assert isinstance(plan.backward_replay, attention_plan._SummingGluonBackward)
    launches = []
    real = launch.FastLauncher.launch
    monkeypatch.setattr(launch.FastLauncher, "launch", lambda self, *a: launches.append(a) or real(self, *a))
    got = _forward_backward(q.clone(), k.clone(), v.clone(), grad.clone(), causal=causal)
    assert launches == []
    assert torch.equal(got[0], expected[0]) and torch.equal(got[2], expected[2]) and torch.equal(got[3], expected[3])
    assert (got[1].float() - expected[1].float()).abs().max().item() <= 1e-2 * expected[1].float().abs().max().item()
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    reference_attention(*leaves, causal=causal, dtype=torch.float32).backward(grad.float())
    for ours, theirs in zip(got[1:], (t.grad for t in leaves)):
        assert ((ours.float() - theirs).norm() / theirs.norm()).item() < 3e-2


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kv_heads, causal", [((2, 8, 1536, 80), 8, True), ((1, 8, 2048, 32), 2, False),
                                                     ((1, 8, 1500, 96), 4, True)])
def test_gpu_the_triton_backward_of_three_launches_is_planned(device, no_plans, monkeypatch, shape, kv_heads, causal):
    """Calls whose shipped backward is the Triton one (delta, dK/dV, dQ: hd80 and 96, split into
    64 + 16 and 64 + 32, and hd32; GQA; a ragged length; hd80 under 2048 keys, from which it
    sums dQ in the Gluon kernel since the thirty-first session): from the third call no
    FastLauncher launch either way, bit for bit the general path."""
    _needs_gpu(device)
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("measured and routed for sm90")
    q, k, v, grad = _inputs(shape, kv_heads, device)
    config = config_for(q, k, backward=True)
    assert not (config.gluon_backward or config.gluon_atomic_dq or config.fused_backward)
    expected = _forward_backward(q, k, v, grad, causal=causal)
    plan = attention_plan.find((_key(q, k, v, causal=causal), True))
    assert plan is not None
    _forward_backward(q, k, v, grad, causal=causal)
    assert isinstance(plan.backward_replay, attention_plan._LaunchesBackward)
    assert len(plan.backward_replay.steps) in (2, 3)
    launches = []
    real = launch.FastLauncher.launch
    monkeypatch.setattr(launch.FastLauncher, "launch", lambda self, *a: launches.append(a) or real(self, *a))
    got = _forward_backward(q.clone(), k.clone(), v.clone(), grad.clone(), causal=causal)
    assert launches == []
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kv_heads", [((1, 8, 1536, 80), 8), ((1, 8, 2048, 128), 4), ((4, 32, 256, 80), 32)])
def test_gpu_saved_tensors_of_another_layout_take_the_general_path(device, no_plans, shape, kv_heads):
    """Inputs that are (batch, seq, heads, head_dim) buffers seen as (batch, heads, seq, head_dim)
    (the incoming gradient contiguous), planned both ways; then a call under save_on_cpu, which hands the backward q, k and v
    unpacked contiguous: the replays' recorded strides no longer describe them, so the general
    path runs (found in review: the replays read them wrong). The Triton backward (hd80 at 1536 keys), the
    Gluon one summing dQ (hd128), the one-launch one (the training pass's shape)."""
    _needs_gpu(device)
    *inputs, grad = _inputs(shape, kv_heads, device)
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in inputs)
    expected = _forward_backward(q, k, v, grad)
    _forward_backward(q, k, v, grad)  # the backward recorded
    plan = attention_plan.find((_key(q, k, v), True))
    assert plan is not None and plan.backward_replay is not None
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        got = _forward_backward(q, k, v, grad)
    for ours, theirs in zip(got, expected):
        assert (ours.float() - theirs.float()).abs().max().item() <= 1e-2 * theirs.float().abs().max().item()


@pytest.mark.gpu
def test_gpu_other_layouts_of_a_planned_shape_are_other_signatures(device, no_plans):
    """The same shape as a transposed view, 2 bytes off a 16-byte boundary, and with a
    non-contiguous incoming gradient: each right, against the float32 reference."""
    _needs_gpu(device)
    from gpudoctor.kernels.attention import reference_attention

    q, k, v, grad = _inputs((2, 8, 256, 80), 8, device, torch.float16)
    _forward_backward(q, k, v, grad)  # planned
    transposed = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    flat = torch.empty(q.numel() + 1, device=device, dtype=q.dtype)
    offset = flat[1:].view(q.shape).copy_(q)
    odd_grad = grad.transpose(-1, -2).contiguous().transpose(-1, -2)
    for inputs, gradient in ((transposed, grad), ((offset, k, v), grad), ((q, k, v), odd_grad)):
        got = _forward_backward(*inputs, gradient)
        leaves = [t.detach().float().requires_grad_() for t in inputs]
        want = reference_attention(*leaves, causal=True, dtype=torch.float32)
        want.backward(gradient.float())
        for a, b in zip(got, [want] + [t.grad for t in leaves]):
            assert (a.float() - b).abs().max().item() < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kv_heads, causal", [((4, 16, 1024, 128), 16, True), ((4, 16, 1000, 176), 4, False)])
def test_gpu_the_gluon_forward_is_planned_too(device, no_plans, monkeypatch, shape, kv_heads, causal):
    """Forward-only calls past the small ones take the Gluon forward on sm90 (width 128, and 192
    with its tail, GQA, a ragged last key block): planned like the Triton forward since it makes
    its TMA descriptors in the kernel; no FastLauncher launch after the first call, bit for bit,
    also on a thread of its own (the descriptors' scratch comes from an allocator set per thread)."""
    _needs_gpu(device)
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon forward runs on sm90")
    q, k, v, _ = _inputs(shape, kv_heads, device)
    assert config_for(q, k).gluon_forward
    with torch.no_grad():
        expected = flash_attention(q, k, v, causal=causal)
    assert attention_plan.find((_key(q, k, v, causal=causal), False)) is not None
    launches = []
    real = launch.FastLauncher.launch
    monkeypatch.setattr(launch.FastLauncher, "launch", lambda self, *a: launches.append(a) or real(self, *a))
    results = []

    def forward():
        with torch.no_grad():
            results.append(flash_attention(q.clone(), k.clone(), v.clone(), causal=causal))

    forward()
    worker = threading.Thread(target=forward)
    worker.start()
    worker.join()
    assert len(results) == 2 and all(torch.equal(result, expected) for result in results)
    assert launches == []
    want = reference_attention(q.float(), k.float(), v.float(), causal=causal, dtype=torch.float32)
    assert (expected.float() - want).abs().max().item() < 2e-2


@pytest.mark.gpu
def test_gpu_a_triton_forward_on_device_descriptors_is_planned_on_any_thread(device, no_plans):
    """The Triton forward making TMA descriptors in the kernel (DEVICE_DESCRIPTORS) needs Triton's
    allocator for their scratch, set per thread: its replay sets it, so a thread that never ran
    the general path gets the same bits."""
    _needs_gpu(device)
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("device-side descriptors on sm90")
    import dataclasses

    from gpudoctor.kernels.attention import DEVICE_DESCRIPTORS

    q, k, v, _ = _inputs((2, 8, 1024, 64), 8, device)
    config = dataclasses.replace(config_for(q, k), tma=DEVICE_DESCRIPTORS, gluon_forward=False)
    with torch.no_grad():
        expected = flash_attention(q, k, v, config=config)
    plan = attention_plan.find((_key(q, k, v, config=config), False))
    assert plan is not None and plan.forward_replay.scratch
    results = []

    def forward():
        with torch.no_grad():
            results.append(flash_attention(q, k, v, config=config))

    worker = threading.Thread(target=forward)
    worker.start()
    worker.join()
    assert len(results) == 1 and torch.equal(results[0], expected)


def test_a_signature_that_cannot_be_planned_is_watched_once(no_plans):
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    assert not attention_plan.seen("key")
    attention_plan.remember("key", "call", [], q, k, v, q)
    assert attention_plan.seen("key") and attention_plan.find("key") is None


def test_an_unhashable_option_gets_the_validation_error_not_a_type_error():
    q, k, v = (torch.zeros(1, 2, 8, 32, dtype=torch.float16) for _ in range(3))
    assert _key(q, k, v, softmax_scale=[0.5]) is None
    with pytest.raises(ValueError, match="softmax_scale"):
        flash_attention(q, k, v, softmax_scale=[0.5])
