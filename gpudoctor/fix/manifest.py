"""The manifest: a JSON record (XDG state dir) of every change ``gpudoctor fix`` made, with
enough detail to undo exactly that change and nothing else.

Change records (``op``):
  mkdir        {"path", "purpose": "fix" | "manifest"}
  symlink      {"link", "target", "previous_target"}
  write_file   {"path", "content", "written"}  a file gpudoctor created (env file excluded);
                                             "written": true once it was written whole
  env          {"entry": {...}, "replaced": {...} | null}
  env_file     {"path"}                      the env file itself was created by gpudoctor
  root_file    {"path", "sha256"}            a root-owned file --system created (ld.so.conf.d)
  root_symlink {"link", "target"}            a root-owned symlink --system created
  root_command {"argv", "undo_argv"}         older manifests; undone only where the undo is one
                                             gpudoctor derives itself (see actions/root_command)
  packages     {"manager", "argv", "added"}  distro packages an install added (--system)
               {"manager", "argv", "state": "in progress", "requested", "before", "pid"}
                                             recorded before the install ran; it stays so when
                                             the run was killed (undo works from "before")
  append_line  {"path", "line", "added", "created"}  a line appended to a user's file (--profile)
  edit_file    {"path", "original", "sha256_before", "sha256_after"}  fix --code (actions/edit_file)

Manifest-first (issue 14): ``record`` makes the record durable (written, fsynced, renamed,
directory fsynced) BEFORE the caller makes the change, so a crash, a kill or a full disk at any
point leaves a manifest that names every change that may have happened; undo checks each one
against the disk. ``state_lock`` serialises every fix and undo of one user (fcntl.flock)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from .. import xdg

SCHEMA = 1
LOCK_NAME = "lock"


class ManifestError(Exception):
    """The manifest cannot be read as gpudoctor's record: fix and undo refuse to touch it."""


@dataclass
class Manifest:
    """The manifest file and its change records, oldest first (the record kinds are listed above). Each
    ``record`` is on disk before the change it names is made."""

    path: str
    changes: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str) -> "Manifest":
        try:
            with open(path, "rb") as handle:
                raw = handle.read(64 << 20)
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise ManifestError(f"{path}: cannot read the manifest ({exc.strerror or exc})") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ManifestError(f"{path} is not valid JSON; move it aside to continue "
                                "(nothing was changed)") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            schema = data.get("schema") if isinstance(data, dict) else None
            raise ManifestError(f"{path}: unsupported manifest schema {schema!r}; move it aside to continue")
        changes = data.get("changes", [])
        if not isinstance(changes, list):
            raise ManifestError(f"{path}: 'changes' is not a list; move it aside to continue")
        return cls(path, changes)

    def record(self, op: str, **details: Any) -> dict[str, Any]:
        """Append a change and make it durable before returning (manifest-first)."""
        change = {"op": op, "time": round(time.time(), 3), **details}
        self.changes.append(change)
        try:
            self.save()
        except BaseException:
            self.changes.pop()
            raise
        return change

    def update(self, change: dict[str, Any], **details: Any) -> None:
        """Add what is known only after the change (e.g. a symlink's previous target)."""
        change.update(details)
        self.save()

    def forget(self, change: dict[str, Any]) -> None:
        """The change recorded first did not happen (it failed): drop its record, best effort.
        Where even that fails (a full disk), undo finds nothing on disk and says so."""
        self.changes = [c for c in self.changes if c is not change]
        with contextlib.suppress(OSError):
            self.save()

    def owns_dir(self, path: str) -> bool:
        return any(c.get("op") == "mkdir" and c.get("path") == path for c in self.changes)

    def owns_symlink(self, link: str) -> dict[str, Any] | None:
        for change in reversed(self.changes):
            if change.get("op") == "symlink" and change.get("link") == link:
                return change
        return None

    def save(self) -> None:
        """Atomic and durable: temp file (O_EXCL, 0600) + fsync + rename + fsync of the dir."""
        from ..paths import write_private_file

        data = json.dumps({"schema": SCHEMA, "changes": self.changes}, indent=1) + "\n"
        write_private_file(self.path, data.encode("utf-8"))
        fsync_dir(os.path.dirname(self.path))

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        fsync_dir(os.path.dirname(self.path))


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _acquire(lock_path: str) -> int | None:
    """An fd holding an exclusive flock on ``lock_path``, or None when the file vanished
    meanwhile (a concurrent undo removed the state dir): the caller starts over."""
    import fcntl

    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        current = os.stat(lock_path, follow_symlinks=False)
        held = os.fstat(fd)
        if (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            return fd
    except FileNotFoundError:
        pass
    os.close(fd)
    return None


@contextlib.contextmanager
def state_lock(state_dir: str, create: bool = True) -> Iterator["Manifest | None"]:
    """Lock the user's gpudoctor state and yield its manifest, loaded under the lock.

    With ``create``, the state dir is made (0700, each new directory recorded with purpose
    "manifest", so undo removes it too) and must pass the own-directory rule. Without it, a
    missing state dir yields None (there is nothing to undo). When the run recorded nothing,
    the state dir is left as it was found."""
    from ..paths import UnsafeDirectory, parent_dir_problem, private_dir_problem

    manifest_path = os.path.join(state_dir, "manifest.json")
    _remove_stale_builds(state_dir)
    for _attempt in range(50):
        if not os.path.lexists(state_dir):
            if not create:
                yield None
                return
            _build_state_dirs(state_dir, parent_dir_problem)
        problem = private_dir_problem(state_dir)
        if problem and not os.path.lexists(state_dir):
            # Removed while checked (a concurrent undo, or a run that recorded nothing, removes
            # the state dir and the parents it made): look again, as after a lost lock. It
            # ended a fix with exit 2 in a fresh-clone CI run (test_concurrent_fix_and_undo_then_undo_is_exact).
            continue
        if problem:
            raise UnsafeDirectory(f"refusing to keep gpudoctor's state in {state_dir}: {problem}")
        lock_path = os.path.join(state_dir, LOCK_NAME)
        fd = _acquire(lock_path)
        if fd is None:
            continue
        try:
            manifest = Manifest.load(manifest_path)
            yield manifest
            if create and all(c.get("op") == "mkdir" and c.get("purpose") == "manifest" for c in manifest.changes):
                _remove_state(manifest, lock_path)  # nothing recorded: leave no trace
            return
        finally:
            os.close(fd)  # releases the flock
    raise OSError(f"could not lock {state_dir}: it keeps disappearing")


_BUILD_SUFFIX = ".gpudoctor-build"


def _build_state_dirs(state_dir: str, parent_problem: Any) -> None:
    """Make the state dir and its missing parents so that no kill leaves them unrecorded: the
    missing chain is built under a temporary name (``.NAME.PID.gpudoctor-build``) with its
    manifest, which already records every directory of the chain, and then renamed into place
    in one step. A kill before the rename leaves only the temporary tree, which the next fix or
    undo removes (``_remove_stale_builds``)."""
    from ..paths import UnsafeDirectory

    missing = []
    probe = os.path.abspath(state_dir)
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not missing:  # a concurrent gpudoctor renamed its tree into place since the caller looked
        return
    problem = parent_problem(probe)
    if problem:
        raise UnsafeDirectory(f"refusing to create {state_dir}: {problem}")
    top = missing[-1]
    build = os.path.join(probe, f".{os.path.basename(top)}.{os.getpid()}{_BUILD_SUFFIX}")
    os.mkdir(build, 0o700)
    try:
        os.chmod(build, 0o700)
        inner = build
        for directory in reversed(missing[:-1]):
            inner = os.path.join(inner, os.path.basename(directory))
            os.mkdir(inner, 0o700)
            os.chmod(inner, 0o700)
        records = Manifest(os.path.join(inner, "manifest.json"))
        records.changes = [{"op": "mkdir", "path": d, "purpose": "manifest", "time": round(time.time(), 3)}
                           for d in reversed(missing)]
        records.save()
        try:
            os.rename(build, top)
        except OSError:  # a concurrent gpudoctor made it first: use theirs
            if not os.path.isdir(top):
                raise
            _remove_tree(build)
            return
        fsync_dir(probe)
    except BaseException:
        if os.path.lexists(build):
            _remove_tree(build)
        raise


def _remove_tree(path: str) -> None:
    """Remove a build tree: only directories and regular files, nothing followed."""
    import shutil

    with contextlib.suppress(OSError):
        shutil.rmtree(path)


def _remove_stale_builds(state_dir: str) -> None:
    """Build (and teardown) trees of gpudoctor runs no longer alive, in any existing ancestor
    of the state dir: a kill between making such a tree and renaming it leaves one."""
    probe = os.path.dirname(os.path.abspath(state_dir))
    places = []
    while probe != os.path.dirname(probe):
        if os.path.isdir(probe):
            places.append(probe)
        probe = os.path.dirname(probe)
    for name, path in own_entries(places, lambda name: name.endswith(_BUILD_SUFFIX)):
        pid = name[: -len(_BUILD_SUFFIX)].rpartition(".")[2]
        if pid.isdigit() and not _alive(int(pid)) and os.path.isdir(path):
            _remove_tree(path)


def own_entries(places, wanted):
    """(name, path) of each entry of ``places`` whose name ``wanted`` accepts, that is not a
    symlink and belongs to this user: the leftovers of gpudoctor's own runs it may clean up."""
    for place in places:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        for name in names:
            path = os.path.join(place, name)
            if not wanted(name):
                continue
            try:
                info = os.lstat(path)
            except OSError:  # gone meanwhile (another run cleaned it)
                continue
            if not stat.S_ISLNK(info.st_mode) and info.st_uid == os.geteuid():
                yield name, path


def teardown_state_dirs(own_dirs: list[str], keep_files: set[str]) -> str | None:
    """Remove gpudoctor's state dirs (``own_dirs``, top first) in one atomic step: the highest
    one whose whole tree is only these dirs and ``keep_files`` (file names gpudoctor keeps
    there) is renamed to a teardown name and then deleted, so a kill leaves either the
    manifest or a tree the next run removes. Returns the removed top dir, or None."""
    own = set(own_dirs)
    for top in own_dirs:
        if _only_ours(top, own, keep_files):
            build = os.path.join(os.path.dirname(top), f".{os.path.basename(top)}.{os.getpid()}{_BUILD_SUFFIX}")
            os.rename(top, build)
            fsync_dir(os.path.dirname(top))
            _remove_tree(build)
            return top
    return None


def _only_ours(top: str, own: set[str], keep_files: set[str]) -> bool:
    import stat

    for directory, dirnames, filenames in os.walk(top):
        if directory not in own:
            return False
        for name in dirnames:
            if os.path.islink(os.path.join(directory, name)):
                return False
        for name in filenames:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or not (name in keep_files or name.startswith(".manifest.json.gpudoctor-")):
                return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_state(manifest: Manifest, lock_path: str) -> None:
    """Remove the lock file, the manifest and the state dirs recorded as ours, while locked;
    a waiter sees its lock file gone and starts over."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(manifest.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_path)
    for change in reversed(manifest.changes):
        if change.get("op") == "mkdir" and change.get("purpose") == "manifest":
            with contextlib.suppress(OSError):
                os.rmdir(change["path"])
    manifest.changes = []


# -- trust nothing read back (issue 14 item 13) --------------------------------------------------
# The manifest is a file on disk: anyone who can write it (or a bug, or a full disk) can put
# anything in it. Undo acts only on records of the shapes gpudoctor writes, naming paths inside
# the places gpudoctor writes to, and never runs a command taken from it: root undo is derived
# from the record's kind by gpudoctor's own code.

LDCONF_DIR = "/etc/ld.so.conf.d/"
ROOT_SYMLINK_NAMES = ("libcuda.so",)


def _clean_path(value: Any) -> bool:
    return (isinstance(value, str) and os.path.isabs(value) and os.path.normpath(value) == value
            and not any(ch in value for ch in "\0\n\r"))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _ancestor_of(path: str, roots: tuple[str, ...]) -> bool:
    return any(root == path or root.startswith(path.rstrip("/") + "/") for root in roots)


def normalized_change(change: Any, dirs: Any) -> tuple[dict[str, Any] | None, str]:
    """(the record as undo may act on it, "") or (None, why it is refused). Older
    ``root_command`` records become ``root_file``/``root_symlink`` when they are one of the two
    shapes gpudoctor wrote; any other is refused."""
    from .envfile import EnvEntry
    from .packages import REMOVE_COMMANDS
    from .plan import profile_line

    if not isinstance(change, dict) or not isinstance(change.get("op"), str):
        return None, "not a change record"
    op = change["op"]
    roots = (dirs.cache, dirs.config, dirs.state)
    home = xdg.home(os.environ)  # as the own directories were placed (a relative HOME ignored)
    if op == "mkdir":
        path, purpose = change.get("path"), change.get("purpose", "fix")
        if not _clean_path(path) or path == "/":
            return None, f"mkdir of {path!r}: not a clean absolute path"
        if purpose == "manifest" and not _ancestor_of(path, (dirs.state,)):
            return None, f"mkdir of {path}: not gpudoctor's state directory or one above it"
        if purpose not in ("fix", "manifest") or not (_inside(path, roots) or _ancestor_of(path, roots)
                                                      or _inside(path, (home,))):
            return None, f"mkdir of {path}: outside the places gpudoctor makes directories"
        return change, ""
    if op == "symlink":
        link, target = change.get("link"), change.get("target")
        if not _clean_path(link) or not _inside(link, roots) or not isinstance(target, str):
            return None, f"symlink {link!r}: not a link gpudoctor makes (only inside its own directories)"
        if not isinstance(change.get("previous_target"), (str, type(None))):
            return None, f"symlink {link}: previous_target is not a path"
        return change, ""
    if op == "write_file":
        path = change.get("path")
        if not _clean_path(path) or not _inside(path, roots) or not isinstance(change.get("content"), str):
            return None, f"write_file {path!r}: not a file gpudoctor makes (only inside its own directories)"
        return change, ""
    if op == "env":
        try:
            EnvEntry.from_json(change["entry"])
            if change.get("replaced") is not None:
                EnvEntry.from_json(change["replaced"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return None, f"env entry: {exc}"
        return change, ""
    if op == "env_file":
        if change.get("path") != dirs.env_file:
            return None, f"env_file {change.get('path')!r}: not gpudoctor's env file {dirs.env_file}"
        return change, ""
    if op == "append_line":
        path, line, added = change.get("path"), change.get("line"), change.get("added")
        if not _clean_path(path):
            return None, f"append_line to {path!r}: not a clean absolute path"
        try:
            expected = profile_line(dirs.env_file)
        except ValueError as exc:
            return None, str(exc)
        if line != expected or added not in (line + "\n", "\n" + line + "\n") or not isinstance(change.get("created"), bool):
            return None, f"append_line to {path}: not the line gpudoctor fix --profile adds"
        return change, ""
    if op == "root_file":
        path, digest = change.get("path"), change.get("sha256")
        if not _root_file_ok(path) or not (isinstance(digest, str) and len(digest) == 64
                                           and all(c in "0123456789abcdef" for c in digest)):
            return None, f"root_file {path!r}: not a file gpudoctor writes as root"
        return change, ""
    if op == "root_symlink":
        link, target = change.get("link"), change.get("target")
        if not _root_link_ok(link) or not isinstance(target, str) or not target:
            return None, f"root_symlink {link!r}: not a link gpudoctor makes as root"
        return change, ""
    if op == "root_command":
        argv, undo = change.get("argv"), change.get("undo_argv")
        if isinstance(argv, list) and len(argv) == 2 and argv[0] == "write" and _root_file_ok(argv[1]) \
                and undo in (["rm", "--", argv[1]], ["rm", argv[1]]):
            return {"op": "root_file", "path": argv[1], "sha256": None, "legacy": True}, ""
        if isinstance(argv, list) and len(argv) == 4 and argv[:2] == ["ln", "-s"] and _root_link_ok(argv[3]) \
                and undo in (["rm", "--", argv[3]], ["rm", argv[3]]) and isinstance(argv[2], str):
            return {"op": "root_symlink", "link": argv[3], "target": argv[2]}, ""
        return None, "root_command: its undo is not one gpudoctor derives; it is never run"
    if op == "packages":
        manager, added = change.get("manager"), change.get("added")
        if manager not in REMOVE_COMMANDS:
            return None, f"packages: unknown package manager {manager!r}"
        if change.get("state") == "in progress":  # recorded before the install ran; it never finished
            requested, before = change.get("requested"), change.get("before")
            if not _names_ok(requested) or not requested or not _names_ok(before):
                return None, "packages (in progress): the package names are not plain package names"
            return change, ""
        if not _names_ok(added) or not added:
            return None, "packages: the package names are not plain package names"
        return change, ""
    if op == "edit_file":  # fix --code's records: their kind's own validator
        from .actions.edit_file import record_problem

        problem = record_problem(change)
        return (None, problem) if problem else (change, "")
    return None, f"unknown change {op!r}"


def _root_file_ok(path: Any) -> bool:
    return (_clean_path(path) and path.startswith(LDCONF_DIR) and "/" not in path[len(LDCONF_DIR):]
            and os.path.basename(path).startswith("gpudoctor") and path.endswith(".conf"))


def _root_link_ok(link: Any) -> bool:
    return _clean_path(link) and os.path.basename(link) in ROOT_SYMLINK_NAMES


def _names_ok(names: Any) -> bool:
    return isinstance(names, list) and all(_package_name_ok(n) for n in names)


def _package_name_ok(name: Any) -> bool:
    import re

    return isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9+._:~@-]{0,200}", name) is not None
