"""The Python environment under inspection (issue 13 item 1). gpudoctor is often installed in its
own venv or with pipx, where there is no torch; the training runs in another interpreter. This
module names that interpreter and reads its packages without importing anything in it: the
interpreter is asked once for its ``sys.path`` and version (a few ms, with a timeout and an
output bound through the Host), and its distributions are read from the ``*.dist-info``
folders on that path by the same reader the live host uses.

``InterpretedHost`` wraps a live host: every fact is this machine's, except the distributions
and the Python lines of the system facts, which are the inspected interpreter's."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass

_QUERY = ("import sys, json, platform; print(json.dumps({'path': sys.path, 'version': platform.python_version(), "
          "'executable': sys.executable, 'prefix': sys.prefix, 'base_prefix': sys.base_prefix}))")
QUERY_TIMEOUT_S = 10.0


class InterpreterError(Exception):
    """The named interpreter does not run or does not answer: a usage error for the CLI."""


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter whose packages are inspected instead of gpudoctor's own (``--python``, or the one
    ``training_interpreter`` found), as it described itself: executable, version, ``sys.path`` and prefixes."""

    executable: str  # as it reports sys.executable
    version: str
    path: tuple[str, ...]
    prefix: str
    base_prefix: str
    chosen_because: str = ""  # why this one was inspected, when the user did not name it


def query_interpreter(host, python: str) -> Interpreter:
    """Ask ``python`` for its sys.path and version; ``InterpreterError`` with the reason if it cannot."""
    resolved = python if "/" in python else host.which(python)
    if not resolved or not os.path.exists(resolved):
        raise InterpreterError(f"--python {python}: no such interpreter")
    result = host.run((resolved, "-c", _QUERY), timeout=QUERY_TIMEOUT_S)
    if not result.ok:
        raise InterpreterError(f"--python {python}: it did not answer ({result.why_not()})")
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
        return Interpreter(str(data["executable"]), str(data["version"]), tuple(str(p) for p in data["path"]),
                           str(data["prefix"]), str(data["base_prefix"]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise InterpreterError(f"--python {python}: not a Python interpreter (unexpected answer)") from None


def has_torch(path) -> bool:
    """A torch distribution on ``path`` (folder names only: cheap)."""
    for entry in path:
        try:
            names = os.listdir(entry) if entry.startswith("/") else []
        except OSError:
            continue
        if any(n.lower().startswith("torch-") and n.lower().endswith((".dist-info", ".egg-info")) for n in names):
            return True
    return False


def training_interpreter(host, own_executable: str, own_path, own_prefix: str | None = None) -> Interpreter | None:
    """Without --python: when gpudoctor's own interpreter has no torch but the active conda env,
    $VIRTUAL_ENV or ``python3`` on PATH has, that one (the README's own install gives gpudoctor
    a venv without torch). None when gpudoctor's interpreter has torch or no candidate has."""
    if has_torch(own_path):
        return None
    env = host.env
    candidates = []
    for variable in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        if env.get(variable):
            candidates.append((os.path.join(env[variable], "bin", "python"), f"${variable}"))
    if host.which("python3"):
        candidates.append((host.which("python3"), "python3 on PATH"))
    # a venv's bin/python is a symlink to its base interpreter: environments differ by prefix, not realpath
    for python, where in candidates:
        if not os.path.exists(python) or os.path.abspath(python) == os.path.abspath(own_executable):
            continue
        try:
            found = query_interpreter(host, python)
        except InterpreterError:
            continue
        if own_prefix is not None and os.path.realpath(found.prefix) == os.path.realpath(own_prefix):
            continue
        if has_torch(found.path):
            return dataclasses.replace(found, chosen_because=f"{where} has torch; gpudoctor's own interpreter "
                                                             f"({own_executable}) has none")
    return None


class InterpretedHost:
    """A host whose Python environment is ``interpreter``'s; everything else delegates."""

    def __init__(self, inner, interpreter: Interpreter) -> None:
        self._inner, self.interpreter = inner, interpreter
        self.env = inner.env

    def distributions(self):
        from .host.distributions import installed_distributions

        return installed_distributions(list(self.interpreter.path))

    def system(self):
        info = self._inner.system()
        if info is None:
            return None
        return info._replace(python_version=self.interpreter.version,
                             python_executable=self.interpreter.executable, prefix=self.interpreter.prefix,
                             base_prefix=self.interpreter.base_prefix)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class SearchedHost:
    """An ``InterpretedHost`` whose interpreter is still being looked for: ``training_interpreter``
    runs in a thread (it starts each candidate Python, 20-200 ms: a pyenv shim is a shell script),
    and the machine's own facts (NVML, compilers, ldconfig, the kernel log) are probed meanwhile.
    Only the Python facts (distributions, the Python lines of the system facts) wait for it; when
    no candidate has torch, they are this machine's own, as without the search."""

    def __init__(self, inner, search) -> None:
        from .threads import start_daemon

        self._inner, self.env = inner, inner.env
        self._found: Interpreter | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        start_daemon(self._search, search, name="gpudoctor-interpreter")

    def _search(self, search) -> None:
        try:
            self._found = search()
        except BaseException as exc:  # noqa: BLE001 - said where the facts are asked for
            self._error = exc
        finally:
            self._done.set()

    @property
    def interpreter(self) -> Interpreter | None:
        """The interpreter found (waiting for the search), or None: none has torch, or the search
        failed (then the Python facts raise why, and the checks needing them say so)."""
        self._done.wait()
        return self._found

    def _python_host(self):
        interpreter = self.interpreter
        if self._error is not None:
            raise self._error
        return InterpretedHost(self._inner, interpreter) if interpreter is not None else self._inner

    def distributions(self):
        return self._python_host().distributions()

    def system(self):
        return self._python_host().system()

    def __getattr__(self, name):
        return getattr(self._inner, name)
