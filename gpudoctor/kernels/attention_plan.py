"""Plans: flash_attention's decisions for one signature of its inputs, remembered, so that the
next call of that signature only allocates its outputs and launches.

Why: small calls are host-bound. At the training pass's shape (batch 4, 32 heads, seq 256,
head_dim 80) the H200 runs the forward in 12.5 µs and the one-launch backward in 51 µs, while the
forward's Python took 82 µs without autograd (validation 4.6, config 3.7, FastLauncher's key
7.9, the launch 13.5, allocations 10, the rest in argument plumbing) against cuDNN's 39
(bench/attention_host_parts.py, fourteenth session, docs/benchmarks.md).

A signature is everything those decisions depend on: the inputs' shapes, strides, dtypes,
devices and 16-byte alignment, and the call's options, a config given included (``signature``). The first call of a
signature runs the general path (``attention._Call``) while ``launch.recording()`` watches its
launches. Its forward becomes a plan only where it was one direct launch of a kernel that took
the caller's q, k and v themselves (no padded or realigned copy), the output and the
log-sum-exp as its leading tensors and plain values after them; its backward (at the first
backward) where it was one direct launch taking q, k, v, the output, the incoming gradient
as it came, the three gradients it returns and the log-sum-exp, in that order (the one-launch
backward), or the two launches of the Gluon backward summing dQ (the delta kernel on the output
and the incoming gradient, then the dK/dV kernel on TMA descriptors of q, k, v, the gradient, dK,
dV and dQ's float32 sums, with the log-sum-exp and delta): ``_SummingGluonBackward``; or where
its launches took only the call's own tensors and delta (the Triton backward's two or three
launches): ``_LaunchesBackward``. Everything else keeps the general path (the wide Gluon
backward's split calls among them, attention_gluon_backward_wide.splits: three launches, dK and
dV summed from float32 partials after the dK/dV kernel; what that costs the host in calls
small enough to be host-bound was not measured). A plan holds no tensor, and steps aside
(``usable``) wherever the direct launch may not serve a call: a launch hook (profilers), Triton's
debug knobs, another device current.
"""

from __future__ import annotations

import torch

from . import launch

# Distinct signatures (every new sequence length makes one): past this many, start over rather
# than grow without bound in a job of ever-new shapes.
MAX_PLANS = 4096
_PLANS: dict = {}
_Tensor = torch.Tensor
_CONTIGUOUS = torch.contiguous_format


def signature(q, k, v, causal, softmax_scale, deterministic, config=None) -> tuple | None:
    """What the general path's decisions depend on (None: no plan for these inputs: not plain
    tensors, e.g. a subclass, whose behaviour a plan must not assume). ``config``: a caller's
    own AttentionConfig (frozen, hashed by value), or None for the table's."""
    if type(q) is not _Tensor or type(k) is not _Tensor or type(v) is not _Tensor:
        return None
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype,
           q.get_device(), k.get_device(), v.get_device(),
           q.data_ptr() % 16, k.data_ptr() % 16, v.data_ptr() % 16,
           type(causal), causal, type(softmax_scale), softmax_scale, type(deterministic), deterministic,
           config)
    try:
        hash(key)
    except TypeError:  # an unhashable option (a list for softmax_scale): validate_inputs says why
        return None
    return key


def find(key: tuple | None):
    """The plan remembered for ``key`` where it may serve a call now; else None."""
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None and plan.forward_replay.usable():
        return plan
    return None


def seen(key: tuple | None) -> bool:
    """Whether ``key``'s first call was already watched (planned or not: the decision holds)."""
    return key in _PLANS


def remember(key: tuple, call, launches: list, q, k, v, result) -> None:
    """Keep a plan for ``key`` if the general path's forward (``launches``, recorded while it
    ran ``call`` on q, k, v and returned ``result``) can be replayed (see the module's doc);
    else that it cannot, so that its later calls are not watched again."""
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = _plan(call, launches, q, k, v, result)


def _one_replay(launches: list, leading: int):
    """(the Replay, its leading tensors as launched) where ``launches`` were one launch that can
    be replayed with ``leading`` tensors; else None."""
    if len(launches) == 1 and launches[0].replay is not None and launches[0].replay.leading == leading:
        return launches[0].replay, launches[0].arguments[:leading]
    return None


def _plan(call, launches: list, q, k, v, result):
    one = _one_replay(launches, 5)
    if one is None:
        return None
    replay, (kernel_q, kernel_k, kernel_v, out, lse) = one
    if not (kernel_q is q and kernel_k is k and kernel_v is v
            and result.data_ptr() == out.data_ptr() and result.shape == out.shape
            and out.stride() == torch.empty_like(q, memory_format=_CONTIGUOUS).stride()):
        return None
    return Plan(call, replay, tuple(lse.shape))


def forget() -> None:
    """Drop every plan (tests that watch the general path's launches)."""
    _PLANS.clear()


class Plan:
    """One signature's forward (a launch replayed) and, once seen, its backward. ``call`` is the
    general path's call object (attention._Call) for everything the plan does not replay."""

    __slots__ = ("call", "forward_replay", "lse_shape", "backward_replay", "backward_layout", "backward_seen")

    def __init__(self, call, forward_replay, lse_shape: tuple):
        self.call, self.forward_replay, self.lse_shape = call, forward_replay, lse_shape
        self.backward_replay = self.backward_layout = None
        self.backward_seen = False

    def forward(self, q, k, v):
        """(the tensors the backward needs: q, k, v, out, lse; the output), as call.forward."""
        out = torch.empty_like(q, memory_format=_CONTIGUOUS)
        lse = q.new_empty(self.lse_shape, dtype=torch.float32)
        self.forward_replay(q, k, v, out, lse)
        return (q, k, v, out, lse), out

    def backward(self, grad_out, q, k, v, out, lse):
        """(dq, dk, dv), as call.backward."""
        replay = self.backward_replay
        if replay is not None and _layout(grad_out, q, k, v, out, lse) == self.backward_layout and replay.usable():
            return replay.run(grad_out, q, k, v, out, lse)
        if self.backward_seen or not launch.fast_launch_enabled() or not grad_out.is_contiguous():
            return self.call.backward(grad_out, q, k, v, out, lse)
        # The first backward with a contiguous incoming gradient: the general path, watched.
        self.backward_seen = True
        with launch.recording() as launches:
            grads = self.call.backward(grad_out, q, k, v, out, lse)
        for kind in _BACKWARD_REPLAYS:
            replay = kind.of(launches, q, k, v, out, grad_out, grads, lse)
            if replay is not None:
                break
        if replay is not None:
            self.backward_layout = _layout(grad_out, q, k, v, out, lse)
            self.backward_replay = replay
        return grads


def _layout(*tensors) -> tuple:
    """The strides and 16-byte alignment of the tensors a backward is handed, which its replay's
    launches were recorded with (strides among their arguments, descriptors' shapes and strides).
    Not only the incoming gradient's: a saved-tensor hook (torch.autograd.graph.save_on_cpu)
    hands the backward q, k and v unpacked contiguous where the forward had views of another
    layout, under the same plan; replayed with the recorded strides they were read wrong (found
    in review, seventeenth session, on the H200: max errors 14-676)."""
    return tuple((tensor.stride(), tensor.data_ptr() % 16) for tensor in tensors)


class _OneLaunchBackward:
    """The one-launch backward (attention._launch_fused_backward) replayed: q, k, v, the output,
    the incoming gradient, dq, dk, dv and the log-sum-exp."""

    __slots__ = ("replay",)

    def __init__(self, replay):
        self.replay = replay

    @classmethod
    def of(cls, launches: launch.Recording, q, k, v, out, grad_out, grads, lse):
        """The replay where ``launches`` were that one launch on exactly these tensors; else None."""
        one = _one_replay(launches, 9)
        if one is not None and all(a is b for a, b in zip(one[1], (q, k, v, out, grad_out, *grads, lse))):
            return cls(one[0])
        return None

    def usable(self) -> bool:
        return self.replay.usable()

    def run(self, grad_out, q, k, v, out, lse):
        dq = torch.empty_like(q, memory_format=_CONTIGUOUS)
        dk = torch.empty_like(k, memory_format=_CONTIGUOUS)
        dv = torch.empty_like(v, memory_format=_CONTIGUOUS)
        self.replay(q, k, v, out, grad_out, dq, dk, dv, lse)
        return dq, dk, dv


# _LaunchesBackward's roles: the call's tensors by index (the three gradients it returns), then
# the scratch the general path declared (launch.declare_scratch: delta), made for each call.
_ROLES = ("q", "k", "v", "out", "grad_out", "lse", "dq", "dk", "dv")
_GRADIENTS = {_ROLES.index(name) for name in ("dq", "dk", "dv")}


class _LaunchesBackward:
    """A backward of several launches on the call's own tensors replayed: the Triton backward's
    delta, dK/dV and dQ kernels (or dQ computing delta, then dK/dV). (Not the Gluon dK/dV kernel
    with the Triton dQ, ``deterministic=True``: its unused dQ descriptor is over a placeholder
    tensor.) Every leading argument of every launch is one of q, k, v, the output, the incoming
    gradient, the log-sum-exp, the three gradients the backward returned, or scratch the general path declared (launch.declare_scratch: delta, written whole
    before any kernel reads it); itself, or as the base of a host-side descriptor (its shape,
    strides and padding kept, launch.DescriptorArgument). Anything else (a padded copy, a zeroed
    buffer, the gradients cut from wider ones) is a tensor the replay could not make: then no
    replay. Why: host time, as _SummingGluonBackward's (docs/benchmarks.md,
    seventeenth session)."""

    __slots__ = ("steps", "scratch")

    def __init__(self, steps, scratch):
        self.steps, self.scratch = steps, scratch  # scratch: (shape, dtype) of each

    @classmethod
    def of(cls, launches: launch.Recording, q, k, v, out, grad_out, grads, lse):
        """The replay where every launch in ``launches`` took only those tensors; else None."""
        known = (q, k, v, out, grad_out, lse, *grads)
        # Roles are found by identity: a tensor given twice (flash_attention(x, x, x)) would
        # leave which one a launch took open, and the next call of the signature may not alias.
        if (not launches or len({id(tensor) for tensor in known}) != len(known)
                or not all(grad.is_contiguous() for grad in grads)):
            return None
        known += tuple(launches.scratch)
        if len({id(tensor) for tensor in known}) != len(known):  # declared twice, or an input
            return None
        steps = []
        for launched in launches:
            if launched.replay is None:
                return None
            roles = []
            for argument in launched.arguments[:launched.replay.leading]:
                tensor = argument if isinstance(argument, torch.Tensor) else argument.base
                role = next((index for index, candidate in enumerate(known) if candidate is tensor), None)
                if role is None:
                    return None
                if tensor is argument:
                    roles.append(role)
                else:  # a descriptor: its shape, strides and padding only (a plan holds no tensor)
                    roles.append((role, launch.DescriptorArgument.template(argument)))
            steps.append((launched.replay, tuple(roles)))
        # Each gradient returned must be one a launch wrote (a kernel's output argument): one
        # computed after the launches (dQ's sums converted) is work the replay would skip. The
        # general path does nothing else to them (attention_backward only allocates).
        taken = {role if type(role) is int else role[0] for _, roles in steps for role in roles}
        if not _GRADIENTS <= taken:
            return None
        return cls(tuple(steps), tuple((tuple(t.shape), t.dtype) for t in known[len(_ROLES):]))

    def usable(self) -> bool:
        return all(replay.usable() for replay, _ in self.steps)

    def run(self, grad_out, q, k, v, out, lse):
        tensors = (q, k, v, out, grad_out, lse, torch.empty_like(q, memory_format=_CONTIGUOUS),
                   torch.empty_like(k, memory_format=_CONTIGUOUS), torch.empty_like(v, memory_format=_CONTIGUOUS),
                   *[torch.empty(shape, dtype=dtype, device=q.device) for shape, dtype in self.scratch])
        like = launch.DescriptorArgument.like
        for replay, roles in self.steps:
            replay(*[tensors[role] if type(role) is int else like(role[1], tensors[role[0]]) for role in roles])
        return tensors[6], tensors[7], tensors[8]


class _SummingGluonBackward:
    """The Gluon backward summing dQ (attention.attention_backward's ``gluon_dq`` path) replayed:
    delta = rowsum(out * grad_out) and dQ's float32 sums zeroed by the delta kernel, the dK/dV kernel
    (attention_gluon_backward.backward_dkdv, either width's) on TMA descriptors of q, k, v, the
    gradient, dk, dv, the log-sum-exp, delta and descriptors of the sums, then the sums as q's
    dtype. Why: that path's Python (routing, checks, seven descriptors validated as they are made,
    two launches' keys) is host time that no one-launch plan replays; mid-size calls of 2^26-2^27
    scores were host-bound by it on the H200's hosts (docs/benchmarks.md, sixteenth and
    seventeenth sessions). The descriptors are remade over the new tensors with the recorded
    shapes and strides (launch.DescriptorArgument): the signature fixes q's, k's and v's, the
    plan checks the gradient's, and dk, dv and the sums are made contiguous as recorded."""

    __slots__ = ("delta", "dkdv", "descriptors", "sums_shape")

    def __init__(self, delta, dkdv, descriptors, sums_shape):
        self.delta, self.dkdv, self.descriptors, self.sums_shape = delta, dkdv, descriptors, sums_shape

    @classmethod
    def of(cls, launches: launch.Recording, q, k, v, out, grad_out, grads, lse):
        """The replay where ``launches`` were that path's two launches on these tensors (the
        gradients it returned: dq converted from the sums, dk and dv themselves); else None."""
        if len(launches) != 2 or any(launched.replay is None for launched in launches):
            return None
        delta_launch, dkdv_launch = launches
        if delta_launch.replay.leading != 4 or dkdv_launch.replay.leading != 9:
            return None
        delta_out, delta_grad, delta, zeroed = delta_launch.arguments[:4]
        descriptors = dkdv_launch.arguments[:6] + dkdv_launch.arguments[8:9]
        dq, dk, dv = grads
        sums = descriptors[6].base
        if not (delta_out is out and delta_grad is grad_out and dkdv_launch.arguments[6] is lse
                and any(tensor is delta for tensor in launches.scratch)
                and dkdv_launch.arguments[7] is delta
                and all(descriptor.base is tensor for descriptor, tensor in zip(descriptors, (q, k, v, grad_out, dk, dv)))
                and isinstance(sums, torch.Tensor) and zeroed is sums
                and sums.dtype == torch.float32 and sums.is_contiguous()
                and sums.numel() == q.numel() and dq.shape == q.shape and dq.dtype == q.dtype
                and dk.is_contiguous() and dv.is_contiguous() and delta.shape == lse.shape):
            return None
        # Their shapes, strides and padding only: a plan holds no tensor.
        templates = tuple(launch.DescriptorArgument.template(descriptor) for descriptor in descriptors)
        return cls(delta_launch.replay, dkdv_launch.replay, templates, tuple(sums.shape))

    def usable(self) -> bool:
        return self.delta.usable() and self.dkdv.usable()

    def run(self, grad_out, q, k, v, out, lse):
        delta = torch.empty_like(lse)
        sums = torch.empty(self.sums_shape, device=q.device, dtype=torch.float32)
        self.delta(out, grad_out, delta, sums)
        dk = torch.empty_like(k, memory_format=_CONTIGUOUS)
        dv = torch.empty_like(v, memory_format=_CONTIGUOUS)
        q_desc, k_desc, v_desc, grad_desc, dk_desc, dv_desc, sums_desc = self.descriptors
        like = launch.DescriptorArgument.like
        self.dkdv(like(q_desc, q), like(k_desc, k), like(v_desc, v), like(grad_desc, grad_out), like(dk_desc, dk),
                  like(dv_desc, dv), lse, delta, like(sums_desc, sums))
        return sums.view(q.shape).to(q.dtype), dk, dv


# What a backward recorded may be replayed as, tried in this order (each ``of`` says None where
# the launches are not its kind).
_BACKWARD_REPLAYS = (_OneLaunchBackward, _SummingGluonBackward, _LaunchesBackward)
