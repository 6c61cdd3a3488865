"""Which files a scan reads: the Python files and the config files under the given paths,
without descending into environments, caches and VCS directories (a project's .venv holds
transformers' own sources, which are not the user's code)."""

from __future__ import annotations

import os
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


def project_files(paths: Iterable[str]) -> Iterator[str]:
    for given in paths:
        if os.path.isfile(given):
            yield given
            continue
        for root, dirs, files in os.walk(given):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.exists(os.path.join(root, d, "pyvenv.cfg")))
            for name in sorted(files):
                path = os.path.join(root, name)
                if is_python(path) or is_config(path):
                    yield path
