"""The Gluon attention kernels take their integer arguments unspecialized
(attention_gluon.SHAPE_FREE_INTEGERS, attention_gluon_backward.SHAPE_FREE_INTEGERS): a job whose
batch sizes, head counts and lengths change compiles each kernel once a constexpr setting, not
once for each class (1, divisible by 16, other) of each stride, size and count.

CPU (CI): which arguments are left unspecialized. GPU: calls of other shapes on the same tiles
compile no kernel a second time.
"""

import pytest
import torch
from gluonhelpers import gpu_inputs, hopper, needs_gluon

from gpudoctor.kernels import attention_gluon, attention_gluon_backward, attention_gluon_backward_wide
from gpudoctor.kernels.attention import flash_attention


def _kernels():
    """(kernel, its unspecialized integers, its other arguments that are not constexprs)."""
    descriptors = ("q_desc", "k_desc", "v_desc", "do_desc", "dk_desc", "dv_desc", "LSE", "DELTA", "dq_desc",
                   "qk_scale", "softmax_scale")
    return [(attention_gluon._attention_forward_ws_kernel, attention_gluon.SHAPE_FREE_INTEGERS,
             ("Q", "K", "V", "O", "LSE", "qk_scale")),
            (attention_gluon_backward._attention_backward_dkdv_ws_kernel, attention_gluon_backward.SHAPE_FREE_INTEGERS,
             descriptors),
            (attention_gluon_backward_wide._attention_backward_dkdv_wide_kernel,
             attention_gluon_backward.SHAPE_FREE_INTEGERS, descriptors)]


@needs_gluon
def test_every_integer_argument_is_left_unspecialized():
    """The arguments that are neither constexprs nor pointers, descriptors or floats are exactly
    the listed integers, and Triton leaves each of them unspecialized (a new integer argument
    must join the list)."""
    for kernel, integers, others in _kernels():
        runtime = [param.name for param in kernel.params if not param.is_constexpr]
        assert sorted(runtime) == sorted((*integers, *others)), kernel.fn.__name__
        assert {param.name for param in kernel.params if param.do_not_specialize} == set(integers)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_gpu_other_shapes_on_the_same_tiles_compile_nothing_again(head_dim, monkeypatch):
    """Forward+backward at batch 4, 1 and 3, 32, 16 and 12 query heads, MHA and GQA (4:1, 3:1),
    lengths 2048 and 2000 (divisible by 16 and not): no Gluon kernel compiles twice for the same
    constexprs and argument types (Triton's default specialization compiled again for batch 1 and
    for each divisibility class of the strides and counts)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    import triton

    compiled = []
    integers = {kernel.fn.__name__: set(listed) for kernel, listed, _ in _kernels()}

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        if src.name in integers:
            names = src.fn.arg_names
            constants = {names[index[0]]: value for index, value in src.constants.items()
                         if names[index[0]] not in integers[src.name]}
            types = {name: kind for name, kind in src.signature.items() if name not in integers[src.name]}
            compiled.append((src.name, repr(sorted(constants.items())), repr(sorted(types.items()))))

    monkeypatch.setattr(triton.knobs.compilation, "listener", listener)
    # Twins of the shipped kernels, declared the same way, with empty in-memory caches: each
    # specialization they meet calls Triton's compile (from its disk cache or not) and the listener.
    from triton.experimental import gluon

    for module, name in ((attention_gluon, "_attention_forward_ws_kernel"),
                         (attention_gluon_backward, "_attention_backward_dkdv_ws_kernel"),
                         (attention_gluon_backward_wide, "_attention_backward_dkdv_wide_kernel")):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, gluon.jit(kernel.fn, do_not_specialize=kernel.do_not_specialize))
    for batch, heads, kv_heads, seq in ((4, 32, 8, 2048), (1, 16, 16, 2048), (3, 12, 4, 2048), (2, 16, 4, 2000),
                                        (1, 32, 32, 2000)):
        q, k, v = (t.requires_grad_() for t in gpu_inputs(batch, heads, kv_heads, seq, seq, head_dim,
                                                          torch.bfloat16, seq + heads))
        flash_attention(q, k, v, causal=True).backward(torch.ones_like(q))
    torch.cuda.synchronize()
    dkdv = "_attention_backward_dkdv_wide_kernel" if head_dim == 256 else "_attention_backward_dkdv_ws_kernel"
    assert {name for name, _, _ in compiled} == {"_attention_forward_ws_kernel", dkdv}, compiled
    repeated = [key for key in set(compiled) if compiled.count(key) > 1]
    assert not repeated, repeated
