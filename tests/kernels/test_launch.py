"""The direct launch of an already compiled kernel (gpudoctor/kernels/launch.py): same results as
Triton's own launch, Triton's launch whenever the specialization changes, and never in the way of
the interpreter, of a launch hook or of a wrapper around a kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import triton
from triton.runtime.jit import JITFunction

from gpudoctor.kernels import attention as attention_module
from gpudoctor.kernels import launch
from gpudoctor.kernels.attention import flash_attention


def _inputs(batch, heads, kv_heads, seq, head_dim, device, seed, offset=0):
    """q, k, v, grad_out; ``offset`` elements into a larger buffer (offset 1: not 16-byte aligned)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def draw(*shape):
        count = 1
        for size in shape:
            count *= size
        flat = torch.randn(count + offset, generator=generator).to(device, torch.float16)
        return flat[offset:].view(*shape)

    q = draw(batch, heads, seq, head_dim).requires_grad_()
    k = draw(batch, kv_heads, seq, head_dim).requires_grad_()
    v = draw(batch, kv_heads, seq, head_dim).requires_grad_()
    return q, k, v, draw(batch, heads, seq, head_dim)


def _forward_backward(q, k, v, grad_out, **options):
    for tensor in (q, k, v):
        tensor.grad = None
    out = flash_attention(q, k, v, causal=True, **options)
    out.backward(grad_out)
    return [out.detach().clone()] + [t.grad.clone() for t in (q, k, v)]


def _direct_launches_give_tritons_bits(run, monkeypatch, jit_runs) -> None:
    """``run``'s tensors through the direct launch are Triton's launch's bit for bit, and once
    compiled no launch goes through JITFunction.run."""
    monkeypatch.setattr(launch, "enabled", False)
    expected = run()
    monkeypatch.setattr(launch, "enabled", True)
    run()  # may go through Triton (a specialization the direct path has not seen)
    before = len(jit_runs)
    for _ in range(2):
        for a, b in zip(run(), expected):
            assert torch.equal(a, b)
    assert len(jit_runs) == before


@pytest.fixture
def jit_runs(monkeypatch):
    """How many launches went through JITFunction.run (Triton's own launch) from now on."""
    calls = []
    real = JITFunction.run

    def counting(self, *args, **kwargs):
        calls.append(self.fn.__name__)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "run", counting)
    return calls


def test_argument_key_holds_what_triton_specializes_on():
    aligned = torch.zeros(64, dtype=torch.float16)
    shifted = aligned[1:]
    assert launch._argument_key(aligned) == (torch.float16, True)
    assert launch._argument_key(shifted) == (torch.float16, False)
    assert launch._argument_key(aligned.float()) == (torch.float32, True)
    assert launch._argument_key(0.125) is float and launch._argument_key(3.5) is float
    assert launch._argument_key(16) == 16 and launch._argument_key(17) == 17
    assert launch._argument_key(None) is None


def test_a_gluon_descriptor_is_keyed_by_what_its_kernel_is_compiled_for():
    """Element type, block shape and layout (the descriptor's type string); not the tensor's
    address, shape or strides, which the launcher encodes at every launch."""
    from gpudoctor.kernels import attention_gluon

    if not attention_gluon.available():
        pytest.skip("this Triton has no Gluon")
    q = torch.zeros(2, 4, 64, 128, dtype=torch.bfloat16)
    other = torch.zeros(3, 2, 96, 128, dtype=torch.bfloat16)
    key = launch._argument_key(attention_gluon._descriptor(q, 64, 128))
    assert key == launch._argument_key(attention_gluon._descriptor(other, 64, 128))
    assert key != launch._argument_key(attention_gluon._descriptor(q, 128, 128))
    assert key != launch._argument_key(attention_gluon._descriptor(q.half(), 64, 128))
    hash(key)  # kept in the launcher's table


def test_a_triton_descriptor_is_keyed_by_what_its_kernel_is_compiled_for():
    """Triton's own host descriptor (a mutable dataclass, unhashable itself): element type and
    block shape, as its type string ("tensordesc<bf16[1, 1, 64, 128]>"); not the tensor's address,
    shape or strides. Before, each launch taking one went through JITFunction.run."""
    if launch._TritonDescriptor is None:
        pytest.skip("this Triton has no host-side TensorDescriptor")
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    def described(tensor, block):
        return launch._TritonDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block)

    q = torch.zeros(2, 4, 64, 128, dtype=torch.bfloat16)
    other = torch.zeros(3, 2, 96, 128, dtype=torch.bfloat16)
    key = launch._argument_key(described(q, [1, 1, 64, 128]))
    hash(key)
    assert key == launch._argument_key(described(other, [1, 1, 64, 128]))
    for changed in (described(q, [1, 1, 128, 128]), described(q.half(), [1, 1, 64, 128])):
        assert launch._argument_key(changed) != key
        # what Triton types it as differs too: the key is never coarser than Triton's
        assert (native_specialize_impl(BaseBackend, changed, False, True, True)
                != native_specialize_impl(BaseBackend, described(q, [1, 1, 64, 128]), False, True, True))
    assert (native_specialize_impl(BaseBackend, described(other, [1, 1, 64, 128]), False, True, True)
            == native_specialize_impl(BaseBackend, described(q, [1, 1, 64, 128]), False, True, True))


def test_wrappers_and_interpreted_kernels_are_launched_as_they_are():
    class Spy:
        def __getitem__(self, grid):
            raise AssertionError("not launched here")

    spy = Spy()
    assert launch.fast(spy) is spy
    kernel = attention_module._attention_forward_kernel
    if isinstance(kernel, JITFunction):
        assert launch.fast(kernel) is launch.fast(kernel)
        assert launch.fast(kernel).kernel is kernel
    else:  # Triton's interpreter (no GPU here)
        assert launch.fast(kernel) is kernel


def test_switched_off_by_the_environment():
    code = ("import os; os.environ['GPUDOCTOR_TRITON_FAST_LAUNCH'] = '{}'; "
            "from gpudoctor.kernels import launch; print(launch.enabled)")
    for value, expected in (("0", "False"), ("1", str(launch._ENABLED))):
        result = subprocess.run([sys.executable, "-c", code.format(value)], capture_output=True, text=True,
                                timeout=120, check=True)
        assert result.stdout.strip() == expected


def test_only_on_verified_triton_versions():
    assert launch._ENABLED == triton.__version__.startswith(launch.VERIFIED_TRITON)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, kv_heads, offset", [(80, 32, 0), (64, 8, 0), (72, 4, 0), (80, 32, 1)])
def test_direct_launch_gives_the_same_bits_as_tritons(device, monkeypatch, head_dim, kv_heads, offset):
    if device != "cuda" or not launch._ENABLED:
        pytest.skip("the direct launch runs on a GPU with a verified Triton")
    inputs = _inputs(2, 32, kv_heads, 256 + head_dim, head_dim, device, head_dim + offset, offset)
    monkeypatch.setattr(launch, "enabled", False)
    expected = _forward_backward(*inputs)
    monkeypatch.setattr(launch, "enabled", True)
    for _ in range(3):  # the first may compile and go through Triton; the others are direct
        got = _forward_backward(*inputs)
        for a, b in zip(got, expected):
            assert torch.equal(a, b)


@pytest.mark.gpu
def test_a_known_specialization_skips_jitfunction_run(device, jit_runs):
    if device != "cuda" or not launch._ENABLED:
        pytest.skip("the direct launch runs on a GPU with a verified Triton")
    inputs = _inputs(1, 4, 4, 200, 80, device, 7)  # a shape no other test uses
    _forward_backward(*inputs)
    first = len(jit_runs)
    # The forward and the backward went through Triton once: the backward is one kernel at this
    # size on sm90 (fused_backward), else the delta pass, dK/dV and dQ.
    assert first >= 2
    _forward_backward(*inputs)
    _forward_backward(*inputs)
    assert len(jit_runs) == first
    # Other integer arguments (another sequence length) are another specialization: Triton's
    # launch again, once.
    longer = _inputs(1, 4, 4, 216, 80, device, 7)
    _forward_backward(*longer)
    assert len(jit_runs) > first
    again = len(jit_runs)
    _forward_backward(*longer)
    assert len(jit_runs) == again


def test_a_launch_hook_turns_it_off(monkeypatch):
    if not launch._ENABLED:
        pytest.skip("Triton version not verified: never on")
    from triton import knobs

    monkeypatch.setattr(launch, "enabled", True)
    assert launch.fast_launch_enabled()  # Triton's empty hook chains are no hook

    def hook(metadata):
        pass

    knobs.runtime.launch_enter_hook.add(hook)  # as Proton does
    try:
        assert not launch.fast_launch_enabled()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert launch.fast_launch_enabled()
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", hook)  # assigned, the older way
    assert not launch.fast_launch_enabled()


@pytest.mark.gpu
def test_a_launch_hook_sees_every_launch(device, jit_runs):
    if device != "cuda" or not launch._ENABLED:
        pytest.skip("the direct launch runs on a GPU with a verified Triton")
    from triton import knobs

    inputs = _inputs(1, 4, 4, 136, 80, device, 8)
    _forward_backward(*inputs)
    seen = []

    def hook(metadata):
        seen.append(metadata)

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        before = len(jit_runs)
        _forward_backward(*inputs)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(jit_runs) - before >= 2 and len(seen) >= 2  # forward and (fused) backward at least


def test_the_inlined_key_is_the_argument_key():
    from gpudoctor.kernels import attention_gluon

    tensors = [torch.zeros(64, dtype=torch.float16)[offset:] for offset in (0, 1, 8)]
    descriptors = ([attention_gluon._descriptor(torch.zeros(1, 2, 64, 64, dtype=torch.float16), 64, 64)]
                   if attention_gluon.available() else [])
    if launch._TritonDescriptor is not None:
        base = torch.zeros(1, 2, 64, 64, dtype=torch.float16)
        descriptors.append(launch._TritonDescriptor(base, list(base.shape), list(base.stride()), [1, 1, 64, 64]))
    args = (*tensors, *descriptors, None, 1, 16, 17, 2**40, 0.5, True, "x")
    key = launch.FastLauncher(None).key(3, args, {"BLOCK": 64, "num_warps": 4, "CAUSAL": True})
    from triton import knobs

    assert key == (3, knobs.runtime.debug, knobs.compilation.instrumentation_mode,
                   tuple(launch._argument_key(a) for a in args),
                   (("BLOCK", 64), ("num_warps", 4), ("CAUSAL", (bool, True))))


def test_a_bool_and_an_int_of_the_same_value_are_different_keys():
    """True == 1 in Python (and hashes alike), but Triton compiles an i1 for one and a
    constexpr 1 for the other: a cached kernel must not serve the other."""
    launcher = launch.FastLauncher(None)
    assert launcher.key(0, (True,), {}) != launcher.key(0, (1,), {})
    assert launcher.key(0, (), {"FLAG": True}) != launcher.key(0, (), {"FLAG": 1})
    assert launcher.key(0, (False,), {}) != launcher.key(0, (0,), {})


# -- the cache's key against what JITFunction.run looks at, on CPU: a stand-in for Triton's side
# (kernel[grid] compiles and launches, the compiled kernel's launcher), the real FastLauncher.


class _Compiled:
    """A compiled kernel as FastLauncher uses it: its launcher records the direct launches."""

    def __init__(self):
        self.function, self.packed_metadata, self.launches = object(), (4, 1, 0), []

    def run(self, *arguments):
        self.launches.append(arguments)


class _Kernel:
    """A JITFunction's attributes that JITFunction.run reads; ``kernel[grid](...)`` records a
    launch through Triton and returns the one compiled kernel."""

    def __init__(self, arg_names, constexprs=()):
        self.arg_names, self.constexprs = list(arg_names), list(constexprs)
        self.pre_run_hooks, self.debug = [], None
        self.compiled, self.through_triton = _Compiled(), []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.through_triton.append((args, kwargs))
            return self.compiled
        return run


@pytest.fixture
def direct(monkeypatch):
    """The direct launch on, a stand-in driver (device 0, stream 7): what FastLauncher does, here."""
    if not launch._ENABLED:
        pytest.skip("Triton version not verified: never on")
    from types import SimpleNamespace

    monkeypatch.setattr(launch, "enabled", True)
    monkeypatch.setattr(launch, "_driver", SimpleNamespace(active=SimpleNamespace(
        get_current_device=lambda: 0, get_current_stream=lambda device: 7)))


def _launches(kernel, *calls):
    """Launch each (args, kwargs) through one FastLauncher; how many went through Triton."""
    launcher = launch.FastLauncher(kernel)
    for args, kwargs in calls:
        launcher[(1,)](*args, **kwargs)
    return len(kernel.through_triton)


def test_the_stand_in_is_launched_directly_once_compiled(direct):
    kernel = _Kernel(["X", "n", "BLOCK"], constexprs=[2])
    x = torch.zeros(16)
    assert _launches(kernel, ((x, 5), {"BLOCK": 4}), ((x, 5), {"BLOCK": 4})) == 1
    (arguments,) = kernel.compiled.launches
    assert arguments[3] == 7 and arguments[9:] == (x, 5, 4)


@pytest.mark.parametrize("knob, value", [("runtime.debug", True), ("compilation.instrumentation_mode", "consan")])
def test_a_triton_knob_changed_mid_process_is_another_specialization(direct, monkeypatch, knob, value):
    """JITFunction.run reads knobs.runtime.debug (TRITON_DEBUG) and the instrumentation mode on
    every launch and compiles another kernel when they change (device asserts, ConSan): the
    kernel cached before must not serve the call after."""
    from triton import knobs

    group, name = knob.split(".")
    kernel = _Kernel(["X"])
    launcher = launch.FastLauncher(kernel)
    x = torch.zeros(16)
    launcher[(1,)](x)
    launcher[(1,)](x)
    assert len(kernel.through_triton) == 1
    monkeypatch.setattr(getattr(knobs, group), name, value)
    launcher[(1,)](x)
    assert len(kernel.through_triton) == 2


def test_a_pre_run_hook_sees_every_launch(direct):
    """JITFunction.add_pre_run_hook: Triton calls the hooks with the arguments of every launch."""
    kernel = _Kernel(["X"])
    launcher = launch.FastLauncher(kernel)
    x = torch.zeros(16)
    launcher[(1,)](x)
    kernel.pre_run_hooks.append(lambda *args, **kwargs: None)
    launcher[(1,)](x)
    assert len(kernel.through_triton) == 2 and kernel.compiled.launches == []


def test_a_callable_grid_is_left_to_triton(direct):
    """kernel[lambda meta: ...] is Triton's API too: the grid is computed from the bound
    arguments, which only JITFunction.run has."""
    kernel = _Kernel(["X"])
    x = torch.zeros(16)
    launcher = launch.FastLauncher(kernel)
    for _ in range(2):
        launcher[lambda meta: (2,)](x)
    assert len(kernel.through_triton) == 2


def test_a_float_constexpr_given_positionally_is_specialized_by_value(direct):
    """Triton compiles a constexpr's value into the kernel; floats that are run-time arguments
    are not specialized, a constexpr float is."""
    kernel = _Kernel(["X", "SCALE"], constexprs=[1])
    x = torch.zeros(16)
    assert _launches(kernel, ((x, 0.5), {}), ((x, 0.25), {})) == 2


@pytest.mark.parametrize("first, second", [
    (((), {"C": 1}), ((), {"C": 1.0})),  # a constexpr 1 and 1.0 type apart (int and float arithmetic)
    (((1,), {}), ((__import__("numpy").float64(1.0),), {})),  # 1.0 == 1 and hashes alike
    (((), {"C": 2}), ((), {"C": __import__("numpy").int64(2)})),
])
def test_values_equal_across_types_are_different_specializations(direct, first, second):
    kernel = _Kernel(["C"])
    assert _launches(kernel, first, second) == 2
    assert kernel.compiled.launches == []


def test_a_tensor_given_by_keyword_is_not_kept(direct):
    """Tensors hash by identity: one in the key would keep every tensor passed by keyword alive
    (GPU memory, up to MAX_ENTRIES of them) and never hit again."""
    import gc
    import weakref

    kernel = _Kernel(["X", "Y"])
    launcher = launch.FastLauncher(kernel)
    y = torch.zeros(16)
    alive = weakref.ref(y)
    launcher[(1,)](torch.zeros(16), Y=y)
    kernel.through_triton.clear()  # the stand-in's own record of the call
    del y
    gc.collect()
    assert alive() is None and not launcher._compiled


def test_recording_gives_a_replay_of_each_direct_launch(direct):
    """While recording, a launch that is (or becomes) a cached direct launch yields a Replay: the
    same compiled kernel, with other leading tensors and every later argument as recorded."""
    kernel = _Kernel(["X", "Y", "n", "scale", "BLOCK"], constexprs=[4])
    launcher = launch.FastLauncher(kernel)
    x, y = torch.zeros(16), torch.ones(16)
    with launch.recording() as launches:
        launcher[(3, 2)](x, y, 5, 0.5, BLOCK=4)  # compiled through Triton, kept
        launcher[(3, 2)](x, y, 5, 0.5, BLOCK=4)  # direct
    assert len(launches) == 2 and all(r.replay is not None for r in launches)
    assert launches[0].arguments == (x, y, 5, 0.5)
    replay = launches[1].replay
    assert replay.leading == 2 and replay.usable()
    x2, y2 = torch.zeros(32), torch.ones(32)
    replay(x2, y2)
    grid_and_stream, arguments = kernel.compiled.launches[-1][:4], kernel.compiled.launches[-1][9:]
    assert grid_and_stream == (3, 2, 1, 7) and arguments == (x2, y2, 5, 0.5, 4)
    with launch.recording() as later:
        pass
    launcher[(3, 2)](x, y, 5, 0.5, BLOCK=4)
    assert later == [] and len(launches) == 2  # nothing recorded outside


def test_recording_gives_no_replay_where_the_direct_launch_cannot_repeat_it(direct):
    """Triton's own launch (a pre-run hook) and a tensor after a plain argument: no Replay."""
    kernel = _Kernel(["X", "n", "Y"])
    launcher = launch.FastLauncher(kernel)
    x = torch.zeros(16)
    with launch.recording() as launches:
        launcher[(1,)](x, 5, x)
        launcher[(1,)](x, 5, x)
        kernel.pre_run_hooks.append(lambda *args, **kwargs: None)
        launcher[(1,)](x, 5, x)
    assert [r.replay for r in launches] == [None, None, None]
    assert launches[2].arguments == (x, 5, x)


def test_a_replay_steps_aside_when_the_direct_launch_may_not_serve(direct, monkeypatch):
    """usable(): no launch hook, Triton's compile knobs as recorded, the recorded device current."""
    from types import SimpleNamespace

    from triton import knobs

    kernel = _Kernel(["X"])
    launcher = launch.FastLauncher(kernel)
    x = torch.zeros(16)
    with launch.recording() as launches:
        launcher[(1,)](x)
    replay = launches[0].replay
    assert replay.usable()
    with monkeypatch.context() as patched:
        patched.setattr(knobs.runtime, "launch_enter_hook", lambda metadata: None)
        assert not replay.usable()
    with monkeypatch.context() as patched:
        patched.setattr(knobs.runtime, "debug", not knobs.runtime.debug)
        assert not replay.usable()
    with monkeypatch.context() as patched:
        patched.setattr(launch, "_driver", SimpleNamespace(active=SimpleNamespace(
            get_current_device=lambda: 1, get_current_stream=lambda device: 7)))
        assert not replay.usable()
    monkeypatch.setattr(launch, "enabled", False)
    assert not replay.usable()


@pytest.mark.gpu
def test_the_gluon_kernels_launch_directly_with_the_same_bits(device, monkeypatch, jit_runs):
    """The Gluon forward (descriptors made in the kernel) and dK/dV kernel (host TMA descriptors
    as arguments) through the direct launch: the same bits as Triton's launch, and
    JITFunction.run skipped once compiled."""
    if device != "cuda" or not launch._ENABLED or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernels run on Hopper; the direct launch with a verified Triton")
    from gpudoctor.kernels import attention_gluon, attention_gluon_backward

    generator = torch.Generator(device="cuda").manual_seed(21)
    q, k, v, grad = (torch.randn(1, 4, 1000, 128, device="cuda", dtype=torch.bfloat16, generator=generator)
                     for _ in range(4))

    def run():
        out, lse = attention_gluon.attention_forward(q, k, v, True, 0.1)
        delta = (out.float() * grad.float()).sum(-1).reshape(4, 1000).contiguous()
        return (out, lse, *attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, 0.1))

    _direct_launches_give_tritons_bits(run, monkeypatch, jit_runs)


@pytest.mark.gpu
def test_the_host_descriptor_kernels_launch_directly_with_the_same_bits(device, monkeypatch, jit_runs):
    """The Triton kernels on Triton's own host descriptors (HOST_DESCRIPTORS: a head_dim that is not
    a power of two, 1024 keys, sm90) through the direct launch: the same bits as Triton's launch,
    and JITFunction.run skipped once compiled (it ran for every launch before their key)."""
    if device != "cuda" or not launch._ENABLED or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("host descriptors on Hopper; the direct launch with a verified Triton")
    import dataclasses

    q, k, v, grad = _inputs(1, 4, 4, 1024, 112, device, 23)
    config = dataclasses.replace(attention_module.config_for(q, k), gluon_forward=False, gluon_backward=False,
                                 gluon_atomic_dq=False)
    assert config.tma == attention_module.HOST_DESCRIPTORS

    _direct_launches_give_tritons_bits(  # deterministic: dQ not summed
        lambda: _forward_backward(q, k, v, grad, deterministic=True, config=config), monkeypatch, jit_runs)


def test_the_scratch_allocator_leaves_a_callers_own_in_place():
    """Kernels making TMA descriptors need Triton's allocator: gpudoctor sets one where the thread
    has none, and keeps the one a caller set for their own kernels (it serves ours too)."""
    import contextvars

    def in_a_fresh_context():
        from triton.runtime import _allocation

        launch.use_torch_scratch()
        assert _allocation._allocator.get() is launch._scratch

        def mine(size, alignment, stream):
            return torch.empty(size, dtype=torch.int8)

        triton.set_allocator(mine)
        launch.use_torch_scratch()
        assert _allocation._allocator.get() is mine

    contextvars.Context().run(in_a_fresh_context)
