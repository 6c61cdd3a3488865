"""The XDG base-directory rule for gpudoctor's own directories, in one place.

``paths.GpudoctorDirs`` is built from it, and ``preflight()``'s cached path uses it directly:
that path must not import dataclasses or typing (several ms at a training script's start).
"""

import os


def gpudoctor_dir(env, name: str, default: str) -> str:
    """``$<name>/gpudoctor``, or ``~/<default>/gpudoctor`` when the variable is unset or relative
    (the spec says relative paths are invalid and must be ignored)."""
    value = env.get(name, "")
    base = value if os.path.isabs(value) else os.path.join(home(env), default)
    return os.path.join(base, "gpudoctor")


def home(env) -> str:
    """$HOME when it is an absolute path; else (unset, empty, or relative such as HOME=. in some
    containers, which would put gpudoctor's directories, its fixes' records and their undo in
    whatever directory the command runs from) the account's home from the password database;
    only where that is missing too, $HOME made absolute."""
    home = env.get("HOME", "")
    if os.path.isabs(home):
        return home
    try:
        import pwd

        account_home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):
        account_home = ""
    if os.path.isabs(account_home):
        return account_home
    return os.path.abspath(home or ".")


CACHE = ("XDG_CACHE_HOME", ".cache")
CONFIG = ("XDG_CONFIG_HOME", ".config")
STATE = ("XDG_STATE_HOME", os.path.join(".local", "state"))
ENV_FILE_NAME = "env.sh"


def not_only_yours(st: os.stat_result, what: str, regular: bool = False) -> str | None:
    """Why a file or directory (its ``os.stat`` result) is not one only this user can change: another
    owner, writable by group or others, or (``regular``) not a regular file; None when it is. The
    reading side of the own-directory rule (``paths.private_dir_problem``) for what preflight reads
    on a training script's start: the cache entry and the env file. Mode bits, not the stat module:
    every import on that path is paid."""
    if regular and st.st_mode & 0o170000 != 0o100000:  # S_ISREG
        return f"{what} is not a regular file"
    if st.st_uid != os.geteuid():
        return f"{what} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{what} is writable by group or others (mode {st.st_mode & 0o7777:04o})"
    return None
