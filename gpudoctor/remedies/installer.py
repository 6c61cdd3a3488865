"""The one way a fix names the Python it is for: ``<interpreter> -m pip …`` and ``<interpreter> -c/-m …``.

A bare ``pip install`` runs whichever pip is first on PATH, which is often not the environment
that was judged: gpudoctor installed with pipx, a conda base beside a venv, ``--python`` naming
the training interpreter, or the interpreter ``check`` found with torch when its own had none.
pip's own guide recommends ``python -m pip`` for this reason. The interpreter is the one whose
packages the detector judged (the system fact's ``python_executable``, which ``InterpretedHost``
answers for the inspected interpreter); a log from an unknown machine has none, and the command
says ``python``, the name its reader runs. An environment known to have no pip (``uv venv``
makes them; ``python -m pip`` there fails with "No module named pip") gets the same command
through ``uv pip … --python <interpreter>``, which installs into that interpreter's environment."""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping

from ..model import SuggestCommand

UNKNOWN_PYTHON = "python"


def interpreter_of(system: Any) -> str | None:
    """The judged interpreter's executable from a system fact (``None`` where it is not known)."""
    return getattr(getattr(system, "info", None), "python_executable", None) or None


def has_pip(packages: Any) -> bool | None:
    """Whether the judged environment has pip installed (None: its distributions could not be read)."""
    if packages is None or not getattr(packages, "recorded", False):
        return None
    return packages.get("pip") is not None


def judged_python(system: Any, packages: Any = None) -> dict[str, Any]:
    """The values a remedy needs to name the judged interpreter: ``python`` and ``python_has_pip``
    (left out where not known, so a remedy falls back to ``python -m pip``)."""
    values: dict[str, Any] = {}
    executable = interpreter_of(system)
    if executable:
        values["python"] = executable
        pip_installed = has_pip(packages)
        if pip_installed is not None:
            values["python_has_pip"] = pip_installed
        uv = getattr(getattr(system, "info", None), "uv", None)
        if pip_installed is False and uv is not None:
            values["uv_found"] = bool(uv)
    return values


def python_of(values: Mapping[str, Any]) -> str:
    """The interpreter as a shell word: the judged environment's executable, else ``python``."""
    executable = values.get("python")
    return shlex.quote(str(executable)) if executable else UNKNOWN_PYTHON


def pip_words(values: Mapping[str, Any], arguments: str, prefix: str = "") -> str:
    """``<python> -m pip <arguments>``, or ``uv pip <subcommand> --python <python> <rest>`` where the judged
    environment has no pip (``values["python_has_pip"] is False``; None or absent: not known, pip assumed).
    With no pip and no uv on PATH either (``values["uv_found"] is False``: a ``venv --without-pip``, or uv
    gone since it made the venv), pip's own bootstrap, ``ensurepip``, installs pip first."""
    python = python_of(values)
    if values.get("python_has_pip") is False and values.get("python"):
        if values.get("uv_found") is False:
            return f"{python} -m ensurepip --upgrade && {prefix}{python} -m pip {arguments}"
        subcommand, _, rest = arguments.partition(" ")
        return f"{prefix}uv pip {subcommand} --python {python}" + (f" {_uv_upgrade(rest)}" if rest else "")
    return f"{prefix}{python} -m pip {arguments}"


# pip options of the remedies' commands that take a value (the value is not a requirement)
_OPTIONS_WITH_VALUE = ("--index-url", "--extra-index-url", "-i", "-c", "-r", "--constraint", "--requirement")


def _uv_upgrade(rest: str) -> str:
    """pip's ``-U`` upgrades the packages named; uv's ``-U`` upgrades everything it resolves (torch
    included: bitsandbytes and accelerate depend on it; astral-sh/uv#3159), so the uv form names each
    package with ``--upgrade-package`` instead."""
    words = shlex.split(rest)
    if "-U" not in words and "--upgrade" not in words:
        return rest
    names, skip_next = [], False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in _OPTIONS_WITH_VALUE:
            skip_next = True
        elif not word.startswith("-"):
            name = re.split(r"[<>=!~\[;@ ]", word, maxsplit=1)[0]
            if name and not name.startswith("<"):
                names.append(name)
    kept = [shlex.quote(w) for w in words if w not in ("-U", "--upgrade")]
    return " ".join([*(f"--upgrade-package {shlex.quote(n)}" for n in names), *kept])


def pip(values: Mapping[str, Any], arguments: str, prefix: str = "") -> SuggestCommand:
    """``pip_words`` with ``prefix`` (environment assignments such as ``CC=… ``) before the install itself."""
    return SuggestCommand(pip_words(values, arguments, prefix))


def python(values: Mapping[str, Any], arguments: str, prefix: str = "") -> SuggestCommand:
    """``[prefix ]<python> <arguments>``: a check the user runs in the judged environment."""
    return SuggestCommand(f"{prefix}{python_of(values)} {arguments}")
