"""The XDG base-directory rule for gpudoctor's own directories, in one place.

``paths.GpudoctorDirs`` is built from it, and ``preflight()``'s cached path uses it directly:
that path must not import dataclasses or typing (several ms at a training script's start).
"""

import os


def gpudoctor_dir(env, name: str, default: str) -> str:
    """``$<name>/gpudoctor``, or ``~/<default>/gpudoctor`` when the variable is unset or relative
    (the spec says relative paths are invalid and must be ignored)."""
    value = env.get(name, "")
    home = env.get("HOME") or os.path.expanduser("~")
    base = value if os.path.isabs(value) else os.path.join(home, default)
    return os.path.join(base, "gpudoctor")


CACHE = ("XDG_CACHE_HOME", ".cache")
CONFIG = ("XDG_CONFIG_HOME", ".config")
STATE = ("XDG_STATE_HOME", os.path.join(".local", "state"))
ENV_FILE_NAME = "env.sh"
