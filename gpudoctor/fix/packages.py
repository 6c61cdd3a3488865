"""Distro packages: the install command a plan runs, which packages are installed, and the
removal that undoes exactly what an install added.

Undo removes with the low-level tool (``dpkg -r``, ``rpm -e``, ``pacman -R``), never with
``apt-get remove`` / ``dnf remove`` / ``zypper remove``: those also remove every package that
came to depend on the removed one since, which would delete things gpudoctor did not install.
The low-level tools refuse instead, and the refusal is reported as "left in place"."""

from __future__ import annotations

import subprocess

QUERY_TIMEOUT_S = 20.0

# The distro package managers' own non-interactive install commands.
INSTALL_COMMANDS: dict[str, tuple[str, ...]] = {
    "apt": ("apt-get", "install", "-y", "--no-install-recommends"),
    "dnf": ("dnf", "install", "-y"),
    "yum": ("yum", "install", "-y"),
    "zypper": ("zypper", "--non-interactive", "install"),
    "pacman": ("pacman", "-S", "--needed", "--noconfirm"),
}

# Remove exactly the named packages; refuse (non-zero exit) when another package depends on one.
REMOVE_COMMANDS: dict[str, tuple[str, ...]] = {
    "apt": ("dpkg", "--remove"),
    "dnf": ("rpm", "--erase"),
    "yum": ("rpm", "--erase"),
    "zypper": ("rpm", "--erase"),
    "pacman": ("pacman", "--remove", "--noconfirm"),
}

# Ask whether the removal would go through, without changing anything. dpkg needs this: a
# refused ``dpkg --remove`` still marks the packages for removal ("ri"). rpm and pacman refuse
# without leaving a trace.
_REMOVE_CHECKS: dict[str, tuple[str, ...]] = {
    "apt": ("dpkg", "--dry-run", "--remove"),
}

# Every installed package, one name per line (dpkg: name and status, see _dpkg_installed).
_LIST_COMMANDS: dict[str, tuple[str, ...]] = {
    "apt": ("dpkg-query", "--show", "--showformat", "${binary:Package}\\t${db:Status-Abbrev}\\n"),
    "dnf": ("rpm", "--query", "--all", "--queryformat", "%{NAME}\\n"),
    "yum": ("rpm", "--query", "--all", "--queryformat", "%{NAME}\\n"),
    "zypper": ("rpm", "--query", "--all", "--queryformat", "%{NAME}\\n"),
    "pacman": ("pacman", "--query", "--quiet"),
}


def install_argv(manager: str, packages: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return INSTALL_COMMANDS[manager] + tuple(packages)
    except KeyError:
        raise ValueError(f"unknown package manager {manager!r}") from None


def remove_argv(manager: str, packages: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    try:
        return REMOVE_COMMANDS[manager] + tuple(sorted(packages))
    except KeyError:
        raise ValueError(f"unknown package manager {manager!r}") from None


def removal_check_argv(manager: str, packages: list[str] | tuple[str, ...]) -> tuple[str, ...] | None:
    check = _REMOVE_CHECKS.get(manager)
    return None if check is None else check + tuple(sorted(packages))


def installed_packages(manager: str) -> frozenset[str] | None:
    """The names of all installed packages, or None when the package database cannot be read
    (tool missing, timeout, garbage): then an install gets no undo record rather than a wrong one."""
    argv = _LIST_COMMANDS.get(manager)
    if argv is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, timeout=QUERY_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    text = done.stdout.decode("utf-8", "replace")
    return _dpkg_installed(text) if manager == "apt" else frozenset(line.strip() for line in text.splitlines() if line.strip())


def _dpkg_installed(text: str) -> frozenset[str]:
    """``name<TAB>ii `` lines (want, state, error). Every state but "n" (not installed) and "c"
    (only config files left) counts as present: a package half-installed before an install
    ("iU", "iF") was already there, so undo must not remove it once apt has finished it."""
    names = set()
    for line in text.splitlines():
        name, _, status = line.partition("\t")
        if name and status[1:2] not in ("", "n", "c"):
            names.add(name)
    return frozenset(names)

