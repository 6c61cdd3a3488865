"""The Gluon attention kernels (forward, dK/dV, wide dK/dV) with their integer arguments left
unspecialized ("shape-free", shipped: attention_gluon.SHAPE_FREE_INTEGERS,
attention_gluon_backward.SHAPE_FREE_INTEGERS) or specialized as Triton does by default
("specialized": on the value 1 and on divisibility by 16, a compile for each new class of values).
"shape-free-again" repeats "shape-free" in the same turns: how far two identical settings land
apart is the run's noise. Forward and forward+backward through flash_attention
(deterministic=False), cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop).

    PYTHONPATH=. python3 bench/attention_gluon_specialization.py [--rounds 3] [--shapes hd128-s4096-c ...] [--settings specialized shape-free ...] [--out FILE]
"""

from __future__ import annotations

import importlib
import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): the training pass's own shape,
# lengths divisible by 16 (where the specialized kernel knows it) and not, each width (64, 128,
# 192, 256; the wide backward at 256), MHA and GQA, causal or not.
SHAPES = (
    ("hd80-s256-c-train", 4, 32, 32, 256, 80, True, "bf16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    ("hd40-s2048-c", 8, 32, 32, 2048, 40, True, "bf16"),
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("hd128-gqa4-s16384", 1, 32, 8, 16384, 128, False, "bf16"),
    ("hd112-s512-c", 32, 32, 32, 512, 112, True, "fp16"),
    ("hd96-s1000-c", 8, 32, 32, 1000, 96, True, "fp16"),
    ("hd192-gqa8-s8192", 2, 32, 4, 8192, 192, False, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    ("hd256-s1111", 4, 16, 16, 1111, 256, False, "fp16"),
)
# The kernels the setting switches, as (module, attribute).
KERNELS = (("gpudoctor.kernels.attention_gluon", "_attention_forward_ws_kernel"),
           ("gpudoctor.kernels.attention_gluon_backward", "_attention_backward_dkdv_ws_kernel"),
           ("gpudoctor.kernels.attention_gluon_backward_wide", "_attention_backward_dkdv_wide_kernel"))
# Whether each setting specializes the integers
SETTINGS = {"shape-free": False, "specialized": True, "shape-free-again": False}


def make_apply():
    """apply(label) puts the shipped kernels or their specialized twins (the same functions under
    Triton's default jit) in the modules' place."""
    from triton.experimental import gluon

    places = [(importlib.import_module(module), name) for module, name in KERNELS]
    shipped = [getattr(module, name) for module, name in places]
    specialized = [gluon.jit(kernel.fn) for kernel in shipped]

    def apply(label):  # None: as shipped
        kernels = specialized if label is not None and SETTINGS[label] else shipped
        for (module, name), kernel in zip(places, kernels, strict=True):
            setattr(module, name, kernel)

    return apply


def main(argv=None) -> int:
    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
