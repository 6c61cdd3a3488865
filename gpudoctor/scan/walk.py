"""Which files a scan reads: the Python files and the config files under the given paths,
without descending into environments, caches and VCS directories (a project's .venv holds
transformers' own sources, which are not the user's code)."""

from __future__ import annotations

import os
import stat
from typing import Iterable, Iterator

from .configs import CONFIG_SUFFIXES

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", "env", ".env",
                       "site-packages", "dist-packages", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
                       ".ruff_cache", "build", "dist", ".ipynb_checkpoints", "wandb", "mlruns"})
MAX_FILE_BYTES = 2_000_000  # a generated or data file this large is not a training script


def is_python(path: str) -> bool:
    return path.endswith(".py")


def is_config(path: str) -> bool:
    return path.lower().endswith(CONFIG_SUFFIXES)


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def not_regular(path: str) -> str:
    """Why ``path`` (a symlink followed) is not read, "" for a regular file: open() of a FIFO
    waits for a writer forever, a device never ends. Raises OSError (a dangling link)."""
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode):
        return ""
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"not a regular file ({kind})"


def project_files(paths: Iterable[str]) -> Iterator[str]:
    """Every Python and config file under ``paths`` (a path given by name is yielded whatever it
    is: the scan says why it did not read it)."""
    for given in paths:
        if not os.path.isdir(given):
            yield given
            continue
        for root, dirs, files in os.walk(given):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.exists(os.path.join(root, d, "pyvenv.cfg")))
            for name in sorted(files):
                path = os.path.join(root, name)
                if is_python(path) or is_config(path):
                    yield path
