"""Where gpudoctor keeps its own files, following the XDG base-directory spec.

A small ``Prefix``-like object: every path gpudoctor writes is derived from one of these roots,
so tests point them at a temporary HOME and fixers can prove they never touch anything else.
"""

from __future__ import annotations

import os
from typing import Mapping, NamedTuple

from . import xdg
from .xdg import gpudoctor_dir


class GpudoctorDirs(NamedTuple):
    """gpudoctor's own directories, from the XDG base directory variables: the only places a
    user-local fix writes."""

    cache: str  # $XDG_CACHE_HOME/gpudoctor   (stub libraries, the preflight cache)
    config: str  # $XDG_CONFIG_HOME/gpudoctor (env.sh: the user-local fixes)
    state: str  # $XDG_STATE_HOME/gpudoctor   (manifest of applied changes, for --undo)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "GpudoctorDirs":
        env = os.environ if env is None else env
        return cls(
            cache=gpudoctor_dir(env, *xdg.CACHE),
            config=gpudoctor_dir(env, *xdg.CONFIG),
            state=gpudoctor_dir(env, *xdg.STATE),
        )

    @property
    def stub_lib_dir(self) -> str:
        """Holds ``libcuda.so -> <real dir>/libcuda.so.1`` for linkers that want the bare name."""
        return os.path.join(self.cache, "lib")

    @property
    def env_file(self) -> str:
        return os.path.join(self.config, xdg.ENV_FILE_NAME)

    @property
    def manifest_file(self) -> str:
        return os.path.join(self.state, "manifest.json")


# -- the own-directory rule (issue 14) ---------------------------------------------------------
# gpudoctor writes only into directories the user alone controls, and puts on a search path
# only directories nobody else can add files to. A shared XDG_CACHE_HOME where another user
# made gpudoctor/lib first must not become the victim's LIBRARY_PATH entry.


class UnsafeDirectory(Exception):
    """A directory gpudoctor would write into, or put on a search path, that someone else controls."""


def _ancestor_problem(path: str) -> str | None:
    """Why another user could swap ``path``'s ancestors (rename an entry, plant a new one):
    an ancestor owned by someone other than the user or root, or writable by others without the
    sticky bit (a sticky /tmp is fine: only an entry's owner may rename it)."""
    import stat

    uid = os.geteuid()
    probe = os.path.realpath(path)
    while True:
        try:
            st = os.stat(probe)
        except OSError as exc:
            return f"{probe}: {exc.strerror or exc}"
        if st.st_uid not in (0, uid):
            return f"{probe} belongs to uid {st.st_uid}, who could replace what is inside it"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"{probe} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}) and not sticky"
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def private_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a directory that only the user controls (owner = the user, not
    writable by group or others, not a symlink, safe ancestors), or None when it is."""
    import stat

    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return _ancestor_problem(os.path.dirname(os.path.abspath(path)))


def parent_dir_problem(path: str) -> str | None:
    """Why gpudoctor may not create its own directory inside existing ``path``: it must belong
    to the user or root and be writable by others only when sticky (``/tmp``)."""
    if not os.path.isdir(path):
        return f"{path} is not a directory"
    return _ancestor_problem(path)


def trusted_dir_problem(path: str) -> str | None:
    """Why ``path`` is not safe on a search path (LIBRARY_PATH, LD_LIBRARY_PATH, PATH,
    PYTHONPATH): it must exist (one made later could be anyone's), belong to the user or root,
    and neither it nor an ancestor be writable by others (for a search path even a sticky
    directory is unsafe: anyone can add a new file)."""
    import stat

    if not os.path.isabs(path):
        return f"{path or '(empty)'} is relative: it depends on the current directory"
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path} does not exist ({exc.strerror or exc}); whoever creates it decides what is loaded"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return _ancestor_problem(os.path.dirname(os.path.realpath(path)))


def write_private_file(path: str, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """Create ``path`` safely: a new file made with O_EXCL|O_NOFOLLOW next to it, mode ``mode``,
    owned by the user, fsynced (unless ``durable=False``: a cache that may be lost, where the
    fsync would only slow the caller), then renamed over ``path``. A planted symlink is replaced
    (never followed) and a foreign file's owner and mode are not inherited."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    base = os.path.basename(path)
    for attempt in range(100):
        tmp = os.path.join(directory, f".{base}.gpudoctor-{os.getpid()}-{attempt}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"could not create a temporary file next to {path}")
    try:
        os.fchmod(fd, mode)  # the umask filtered the mode of os.open
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
