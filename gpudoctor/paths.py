"""Where gpudoctor keeps its own files, following the XDG base-directory spec.

A small ``Prefix``-like object: every path gpudoctor writes is derived from one of these roots,
so tests point them at a temporary HOME and fixers can prove they never touch anything else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class GpudoctorDirs:
    cache: str  # $XDG_CACHE_HOME/gpudoctor   (stub libraries, the preflight cache)
    config: str  # $XDG_CONFIG_HOME/gpudoctor (env.sh: the user-local fixes)
    state: str  # $XDG_STATE_HOME/gpudoctor   (manifest of applied changes, for --undo)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "GpudoctorDirs":
        env = os.environ if env is None else env
        home = env.get("HOME") or os.path.expanduser("~")

        def xdg(name: str, default: str) -> str:
            value = env.get(name, "")
            # The spec says relative paths are invalid and must be ignored.
            base = value if os.path.isabs(value) else os.path.join(home, default)
            return os.path.join(base, "gpudoctor")

        return cls(
            cache=xdg("XDG_CACHE_HOME", ".cache"),
            config=xdg("XDG_CONFIG_HOME", ".config"),
            state=xdg("XDG_STATE_HOME", os.path.join(".local", "state")),
        )

    @property
    def stub_lib_dir(self) -> str:
        """Holds ``libcuda.so -> <real dir>/libcuda.so.1`` for linkers that want the bare name."""
        return os.path.join(self.cache, "lib")

    @property
    def env_file(self) -> str:
        return os.path.join(self.config, "env.sh")

    @property
    def manifest_file(self) -> str:
        return os.path.join(self.state, "manifest.json")
