"""Launching a Triton kernel again without JITFunction.run's per-call work.

Why: at the training pass's shape (batch 4, 32 heads, seq 256, head_dim 80) the attention
kernels take 12.5 µs (forward) and 69 µs (forward+backward) on an H200's device, but Triton's
``kernel[grid](...)`` spent about half of a forward's host time binding and specializing ~38
arguments and building the cache key, every call (cProfile in
bench/results/attention-h200-2026-11-23-s4-host.json): small calls were host-bound, twice as slow
as SDPA's C++ launch (docs/benchmarks.md, issue 18).

``FastLauncher`` launches through Triton the first time for a given specialization, keeps the
compiled kernel Triton returns, and afterwards calls that kernel's own launcher directly. The key
holds everything Triton specializes on: each tensor's dtype and 16-byte alignment, every integer's
value (Triton specializes on 1 and on divisibility by 16, and picks i32 or i64 from the value),
the constexprs and launch options (each with its type: True, 1 and 1.0 are equal in Python), the
debug and instrumentation knobs JITFunction.run reads, and the current device. Run-time floats are
passed by value (Triton does not specialize them). A pre-run hook, a callable grid, a constexpr
float given positionally or an argument hashed by identity (a tensor given by keyword) leave the
call to Triton's launch.

It relies on the compiled kernel's launcher protocol (``run(grid0, grid1, grid2, stream, function,
packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``, the one JITFunction.run uses),
which is internal to Triton, so it is used only on the Triton versions it was verified on
(``VERIFIED_TRITON``, GPU tests in tests/kernels/test_launch.py), never under the interpreter, and
never while a launch hook is set (profilers such as Proton must see every launch): everywhere else
the kernel is launched the normal way.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import torch
import triton

from triton.runtime.jit import JITFunction

try:  # Gluon's host-side TMA descriptors (Triton >= 3.5): a launch argument of the Gluon kernels
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _GluonDescriptor
except ImportError:  # pragma: no cover - an older Triton
    _GluonDescriptor = None
try:  # Triton's own host-side TMA descriptors: the Triton kernels' HOST_DESCRIPTORS mode
    from triton.tools.tensor_descriptor import TensorDescriptor as _TritonDescriptor
except ImportError:  # pragma: no cover - an older Triton
    _TritonDescriptor = None
_DESCRIPTORS = tuple(kind for kind in (_GluonDescriptor, _TritonDescriptor) if kind is not None)
try:
    from triton import knobs as _knobs
    from triton.knobs import HookChain as _HookChain
    from triton.runtime import driver as _driver
except ImportError:  # pragma: no cover - Triton before 3.4: the normal launch only
    _knobs = _HookChain = _driver = None

# Triton minor versions whose launcher protocol this was verified against on a GPU (the H200,
# triton 3.6.0, 2026-11-23).
VERIFIED_TRITON = ("3.6",)
_ENABLED = _knobs is not None and triton.__version__.startswith(VERIFIED_TRITON)
# Types whose values a cached call may hold beside positional tensors: they compare and hash by
# value. Anything else (a tensor given by keyword, an object hashed by identity) is launched by
# Triton each time rather than kept alive in the key.
_PLAIN = frozenset((int, float, bool, str, type(None)))
# Distinct integer arguments (sequence lengths, strides) each make an entry: past this many a
# launcher starts over rather than grow without bound in a job of ever-new shapes.
MAX_ENTRIES = 4096


# Read once (a launch must not pay for an environment lookup); tests and benchmarks set it.
enabled = _ENABLED and os.environ.get("GPUDOCTOR_TRITON_FAST_LAUNCH", "1") != "0"


def fast_launch_enabled() -> bool:
    """Whether launches may bypass JITFunction.run now: a verified Triton, not turned off
    (GPUDOCTOR_TRITON_FAST_LAUNCH=0 at import, or ``enabled = False``), no launch hook installed.
    (Under Triton's interpreter ``fast`` hands the kernel back as it is.)"""
    return enabled and _no_hook(_knobs.runtime.launch_enter_hook) and _no_hook(_knobs.runtime.launch_exit_hook)


def _no_hook(hook) -> bool:
    """Triton 3.6 keeps launch hooks in a HookChain (empty unless a tool such as Proton added
    one); a hook may also be assigned as a plain callable."""
    return hook is None or (type(hook) is _HookChain and not hook.calls)


_Tensor = torch.Tensor


def _argument_key(value):
    """What Triton specializes a positional argument on, as a hashable value (FastLauncher.key
    inlines it)."""
    if isinstance(value, _Tensor):
        return (value.dtype, value.data_ptr() % 16 == 0)
    if type(value) is float:  # a run-time float (a constexpr float is never cached: _entry)
        return float
    if type(value) is int or value is None:
        return value
    if type(value) in _DESCRIPTORS:
        return _descriptor_key(value)
    # With its type: True == 1 == 1.0 == numpy.float64(1.0) and they hash alike, but Triton
    # types them apart (i1, a constexpr 1, fp32)
    return (type(value), value)


def _descriptor_key(descriptor):
    # What a kernel is compiled for from a host-side TMA descriptor: its type string names the
    # element type and the block shape, and for Gluon's the shared-memory layout
    # (native_specialize_impl: "tensordesc<bf16[1, 1, 64, 128]>"). The base address, shape,
    # strides and padding are run-time values: the launcher encodes them into the TMA descriptor
    # (fill_tma_descriptor) at every launch, and the base's 16-byte alignment is checked when the
    # descriptor is made. Padding is kept in the key all the same (a kernel per padding at most).
    # Triton's own descriptor is a mutable dataclass, unhashable: without this key each launch
    # taking one went through JITFunction.run. On the H200 (fifteenth session,
    # bench/attention_mid_calls.py, b4 h32 s1024 causal forward+backward, do_bench): hd112 1.19 ms,
    # hd72 1.28, hd40 1.25 for 0.44, 0.39 and 0.28 ms of kernel time; with this key 0.64, 0.59 and
    # 0.60 ms, on a host that was slower.
    return (type(descriptor), descriptor.base.dtype, tuple(descriptor.block_shape),
            getattr(descriptor, "layout", None), descriptor.padding)


class FastLauncher:
    """``FastLauncher(kernel)[grid](*args, **kwargs)`` does what ``kernel[grid](*args, **kwargs)``
    does. Every parameter the positional ``args`` do not cover must be given in ``kwargs`` (no
    defaults), as the cached call passes the kernel's parameters in their declared order."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._compiled: dict = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def key(self, device: int, args: tuple, kwargs: dict) -> tuple:
        # _argument_key, inlined, integers tested first (most arguments are strides and sizes):
        # ~40 arguments a launch, four launches a training step. Keyword values (constexprs,
        # options) by type and value. JITFunction.run also reads TRITON_DEBUG's knob and the
        # instrumentation mode at every launch (compile options: another kernel when they change).
        return (device, _knobs.runtime.debug, _knobs.compilation.instrumentation_mode,
                tuple([a if type(a) is int else float if type(a) is float
                       else (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, _Tensor)
                       else a if a is None
                       else _descriptor_key(a) if type(a) in _DESCRIPTORS else (type(a), a)
                       for a in args]),
                tuple([(name, value if type(value) is int else (type(value), value))
                       for name, value in kwargs.items()]))

    def launch(self, grid, args: tuple, kwargs: dict) -> None:
        recorder = _RECORDER.get()
        # Triton's launch: a pre-run hook (JITFunction.add_pre_run_hook) sees every launch; a
        # callable grid is computed from the bound arguments, which only JITFunction.run has.
        if not fast_launch_enabled() or getattr(self.kernel, "pre_run_hooks", None) or callable(grid):
            self._through_triton(recorder, grid, args, kwargs)
            return
        device = _driver.active.get_current_device()
        key = self.key(device, args, kwargs)
        try:
            entry = self._compiled.get(key)
        except TypeError:  # an unhashable argument: Triton's way
            self._through_triton(recorder, grid, args, kwargs)
            return
        if entry is None:
            compiled = self.kernel[grid](*args, **kwargs)
            if not (all(type(a) in _PLAIN or isinstance(a, _Tensor) or type(a) in _DESCRIPTORS for a in args)
                    and all(type(value) in _PLAIN for value in kwargs.values())):
                if recorder is not None:
                    recorder.append(Recorded(None, args))
                return  # not kept: the key would hold the object (by identity) alive
            if len(self._compiled) >= MAX_ENTRIES:
                self._compiled.clear()
            entry = self._compiled[key] = self._entry(compiled, args, kwargs)
            if recorder is not None:
                recorder.append(Recorded(self._replay(entry, device, key, grid, args, kwargs), args))
            return
        if entry is False:  # this specialization cannot take the direct path
            self._through_triton(recorder, grid, args, kwargs)
            return
        if recorder is not None:
            recorder.append(Recorded(self._replay(entry, device, key, grid, args, kwargs), args))
        compiled, trailing = entry
        grid_0, grid_1, grid_2 = _full_grid(grid)
        stream = _driver.active.get_current_stream(device)
        compiled.run(grid_0, grid_1, grid_2, stream, compiled.function, compiled.packed_metadata,
                     None, None, None, *args, *trailing)

    def _through_triton(self, recorder, grid, args: tuple, kwargs: dict) -> None:
        if recorder is not None:
            recorder.append(Recorded(None, args))
        self.kernel[grid](*args, **kwargs)

    def _replay(self, entry, device: int, key: tuple, grid, args: tuple, kwargs: dict):
        """The Replay of this launch (the compiled kernel ``entry`` holds), or None where its
        arguments after the leading tensors and host-side TMA descriptors are not all plain
        values."""
        if entry is False:
            return None
        leading = 0
        while leading < len(args) and (isinstance(args[leading], _Tensor) or type(args[leading]) in _DESCRIPTORS):
            leading += 1
        rest = args[leading:]
        if not all(type(a) in _PLAIN for a in rest):
            return None
        compiled, trailing = entry
        return Replay(compiled, _full_grid(grid), device, key[1], key[2], leading, rest + trailing)

    def _entry(self, compiled, args: tuple, kwargs: dict):
        """(compiled kernel, the values of the parameters after the positional ones, in declared
        order), or False where the direct path cannot reproduce the call."""
        names = getattr(self.kernel, "arg_names", None)
        constexprs = getattr(self.kernel, "constexprs", None)
        if (names is None or constexprs is None or getattr(compiled, "function", None) is None
                or not hasattr(compiled, "packed_metadata") or not hasattr(compiled, "run")):
            return False
        positional = len(args)
        # The key holds a positional float as "a float" (Triton does not specialize run-time
        # floats), but a constexpr float is compiled in by value.
        if any(index < positional and type(args[index]) is float for index in constexprs):
            return False
        rest = names[positional:]
        if any(name not in kwargs for name in rest):
            return False
        return compiled, tuple(kwargs[name] for name in rest)


def _full_grid(grid) -> tuple:
    """A launch grid of one, two or three sizes as three."""
    return grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1


class Replay:
    """One launch made again with other leading tensors (same dtypes and 16-byte alignment, in the
    same order; host-side TMA descriptors among them as ``DescriptorArgument``s of the same block
    shape), every other argument as it was: the compiled kernel's launcher called straight,
    without building FastLauncher's key. Whoever keeps a Replay answers for it: the leading
    tensors have the recorded dtypes and 16-byte alignment, and every other value the launch
    depended on is the same (attention.py keys its replays by the inputs' shapes, strides,
    dtypes, alignment and the call's options, which fix every integer argument). It holds no
    tensor. Where the direct launch is no longer allowed (``usable``: a launch hook, TRITON_DEBUG
    or another device current), the caller goes its normal way."""

    __slots__ = ("compiled", "grid", "device", "debug", "instrumentation", "leading", "rest", "scratch")

    def __init__(self, compiled, grid, device, debug, instrumentation, leading, rest):
        self.compiled, self.grid, self.device = compiled, grid, device
        self.debug, self.instrumentation, self.leading, self.rest = debug, instrumentation, leading, rest
        # A kernel making TMA descriptors needs global scratch from an allocator set in the thread
        # that launches it, and a replay may run on another thread than the recorded launch
        # (autograd's device thread runs backwards).
        self.scratch = getattr(getattr(compiled, "metadata", None), "global_scratch_size", 0) > 0

    def usable(self) -> bool:
        """The direct launch may serve a call now (see fast_launch_enabled; the knobs Triton
        compiles by as when recorded; the recorded device current)."""
        return (fast_launch_enabled() and _knobs.runtime.debug == self.debug
                and _knobs.compilation.instrumentation_mode == self.instrumentation
                and _driver.active.get_current_device() == self.device)

    def __call__(self, *tensors) -> None:
        compiled, grid = self.compiled, self.grid
        if self.scratch:
            use_torch_scratch()
        compiled.run(grid[0], grid[1], grid[2], _driver.active.get_current_stream(self.device),
                     compiled.function, compiled.packed_metadata, None, None, None, *tensors, *self.rest)


class DescriptorArgument:
    """A host-side TMA descriptor as a Replay passes it: what the compiled kernel's launcher reads
    of one (Triton 3.6's make_tensordesc_arg: the base tensor's address, the shape, the strides,
    the padding; the block shape and shared layout were compiled in), without the validation in
    Python that Gluon's TensorDescriptor runs when made (2.3-5.0 µs a descriptor on the H200's
    hosts, seventeenth session: bench/attention_backward_host_parts.py). Whoever makes one
    answers for what that validation checks: a 16-byte aligned base, the recorded descriptor's
    shape and strides."""

    __slots__ = ("base", "shape", "strides", "padding")

    def __init__(self, base, shape, strides, padding):
        self.base, self.shape, self.strides, self.padding = base, shape, strides, padding

    @classmethod
    def template(cls, descriptor) -> "DescriptorArgument":
        """``descriptor``'s shape, strides and padding, copied, over no tensor: what a plan keeps
        of a recorded descriptor (a plan holds no tensor); ``like`` puts a base under it."""
        return cls(None, list(descriptor.shape), list(descriptor.strides), descriptor.padding)

    @classmethod
    def like(cls, descriptor, base) -> "DescriptorArgument":
        """``descriptor``'s shape, strides and padding over ``base``."""
        return cls(base, descriptor.shape, descriptor.strides, descriptor.padding)


class Recorded:
    """A launch seen while ``recording()``: its Replay (None where it went through Triton's own
    launch, or cannot be replayed) and the arguments it was given."""

    __slots__ = ("replay", "arguments")

    def __init__(self, replay: Replay | None, arguments: tuple):
        self.replay, self.arguments = replay, arguments


_RECORDER: contextvars.ContextVar = contextvars.ContextVar("gpudoctor_launch_recorder", default=None)


class Recording(list):
    """The launches seen (``Recorded``, in order), and in ``scratch`` the tensors the recorded
    code declared scratch (``declare_scratch``)."""

    __slots__ = ("scratch",)

    def __init__(self):
        super().__init__()
        self.scratch: list = []


def declare_scratch(tensor) -> None:
    """Tell a recording on this thread, if any, that ``tensor`` is scratch made for this call and
    written whole by the first launch that takes it before any launch reads it, so that a replay
    may make it anew uninitialised (torch.empty of its shape and dtype). A tensor a replay could
    not make so (zeroed, a copy) is not declared, and keeps the launches that take it from being
    replayed."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.scratch.append(tensor)


@contextlib.contextmanager
def recording():
    """Inside, every FastLauncher launch on this thread is appended to the yielded Recording as a
    ``Recorded`` (for attention.py's per-signature plans)."""
    launches = Recording()
    token = _RECORDER.set(launches)
    try:
        yield launches
    finally:
        _RECORDER.reset(token)


_LAUNCHERS: dict = {}


def fast(kernel):
    """The FastLauncher of a ``@triton.jit`` kernel, made once; anything else (the interpreter's
    kernels, a test's spy wrapping a kernel) is returned as it is, so it sees every launch."""
    if not isinstance(kernel, JITFunction):
        return kernel
    # By id: JITFunction.__hash__ is a Python property chain, and the launcher keeps the kernel
    # alive, so its id is never reused.
    launcher = _LAUNCHERS.get(id(kernel))
    if launcher is None:
        launcher = _LAUNCHERS[id(kernel)] = FastLauncher(kernel)
    return launcher


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


try:  # Triton's allocator slot (a ContextVar), to leave a caller's own allocator in place
    from triton.runtime._allocation import _NULL_ALLOCATOR, _allocator as _ALLOCATOR
except ImportError:  # pragma: no cover - another Triton layout: always set ours
    _NULL_ALLOCATOR = _ALLOCATOR = None


def use_torch_scratch() -> None:
    """Device-side TMA descriptors (make_tensor_descriptor in a kernel) live in a global scratch
    buffer that Triton asks its allocator for at each launch. Where this context (a ContextVar in
    Triton, so each thread's own) has none, set one that takes it from torch's caching allocator
    on the current device; an allocator the caller set for their own kernels stays, and serves
    ours too."""
    if _ALLOCATOR is None or _ALLOCATOR.get() is _NULL_ALLOCATOR:
        triton.set_allocator(_scratch)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """SMs of a tensor's device, for persistent grids (remembered: asked on every call); on the
    CPU interpreter a few, so that the kernels' loops over tiles still get exercised."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count
