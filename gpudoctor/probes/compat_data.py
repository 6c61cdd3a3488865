"""gpudoctor/rules/compat.toml, loaded once: the version facts the compatibility checks and the
CUDA-library probe decide on (each row cites its source in the file)."""

from __future__ import annotations

import functools
from typing import Any

from ..knowledge import load_rules_toml


@functools.lru_cache(maxsize=None)
def compat_tables() -> dict[str, Any]:
    return load_rules_toml("compat.toml")


def wheel_library_stems() -> frozenset[str]:
    """The library names (libcublas, libnvJitLink, ...) torch's nvidia-* wheels ship."""
    return frozenset(compat_tables()["wheel_libraries"])
