"""``gpudoctor.preflight()``: the pre-training hook for other repositories.

Call it at the top of a training script, before torch or Triton compile anything::

    import gpudoctor
    gpudoctor.preflight(require=["bf16"])

It applies gpudoctor's user-local env file to ``os.environ``, runs the static checks (cached by
a fingerprint of the environment, so a repeat costs about a millisecond), prints a compact
summary on stderr and raises :class:`PreflightError` on error findings (warnings too with
``strict=True``) unless ``raise_on_error=False``. Options may also come from
``[tool.gpudoctor]`` in the project's ``pyproject.toml``; explicit arguments win.

The cached path imports only os, sys, time, CPython's C JSON scanner and two small gpudoctor
modules (``xdg``, the rule ``paths.GpudoctorDirs`` is built from, and ``report.preflight``, the
summary's reporter): no json package (it imports re), dataclasses, typing, rich or the engine,
since every import here is paid by every training run. Nothing imported from ``gpudoctor.cli``,
and no process-global state is changed besides the documented ``os.environ`` update from the
env file.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~1.5 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .model import Finding

from .xdg import CACHE, CONFIG, ENV_FILE_NAME, gpudoctor_dir, not_only_yours

CACHE_SCHEMA = 8  # 2: fixes carry their typed actions; 3: the blocking findings are decided when checked;
# 4: the verdict on every required feature; 5: pip commands name the judged interpreter; 6: without pip,
# `uv pip` only where uv is on PATH, else ensurepip first; 7: the notes on an ignored [tool.gpudoctor]
# (said on every call: they were said only by the uncached one); 8: a strict that is not a boolean
# stops the gate (an entry of 7 had passed with it ignored)
CACHE_TTL_S = 24 * 3600  # a safety net: anything the fingerprint misses is re-checked daily
CACHE_KEEP = 32  # fingerprint files kept in the cache dir

# Environment variables that change what the static checks see.
FINGERPRINT_VARS = (
    "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN",
    "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME", "LD_PRELOAD", "RANK",
)
FINGERPRINT_PREFIXES = ("CUDA", "TRITON_", "NVIDIA_", "NVCC", "TORCH_", "XDG_", "BNB_", "UNSLOTH_")
# Files and directories whose change (a driver upgrade, a new libcuda.so symlink, ldconfig)
# must invalidate the cache; only their mtimes are read.
FINGERPRINT_PATHS = (
    "/proc/driver/nvidia/version", "/etc/ld.so.cache", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/cuda", "/usr/bin",
)
CONFIG_KEYS = ("require", "skip", "strict", "raise_on_error", "quiet")
BOOL_KEYS = ("strict", "raise_on_error", "quiet")


class PreflightError(RuntimeError):
    """Raised by :func:`preflight` when the environment would break training.

    ``findings`` holds the blocking :class:`gpudoctor.model.Finding` objects."""

    def __init__(self, message: str, records: list[dict]) -> None:
        super().__init__(message)
        self._records = records

    @property
    def findings(self) -> "list[Finding]":
        from .model import Finding

        return [Finding.from_json(r) for r in self._records]


class PreflightResult:
    """What preflight saw. ``findings`` are built on demand (model import is not free)."""

    __slots__ = ("records", "blocking", "cached", "duration_ms", "env_changed", "checks", "options", "not_run",
                 "unmet_requirements", "scan", "checked_at")

    def __init__(self, entry: dict, cached: bool, duration_ms: float, env_changed: dict) -> None:
        self.records = entry["findings"]  # the findings as JSON records (report.json's form)
        self.options = entry["options"]
        self.blocking = _blocking(entry, bool(self.options.get("strict")))
        self.checks = entry["checks"]
        self.not_run = entry.get("not_run", "")  # why the checks could not run, if they could not
        # a required feature not met, or that could not be verified here, fails the gate
        self.unmet_requirements = [r for r in entry.get("requirements", ()) if r.get("status") != "met"]
        # preflight(scan=True): {"script", "not_judged": [...], "error": why the scan was not done}
        self.scan = entry.get("scan")
        self.cached, self.duration_ms, self.env_changed = cached, duration_ms, env_changed
        # when the machine was last really checked (a cached verdict is as old as its entry: GPU
        # health, throttling and Xid errors can change within the cache's day)
        self.checked_at = entry.get("time")

    @property
    def findings(self) -> "list[Finding]":
        from .model import Finding

        return [Finding.from_json(r) for r in self.records]

    @property
    def ok(self) -> bool:
        """No blocking finding, every required feature verified, and the checks did run: a gate
        must not assume."""
        return (not self.blocking and not self.not_run and not self.unmet_requirements
                and not (self.scan and self.scan.get("error")))

    def __repr__(self) -> str:
        return f"PreflightResult(ok={self.ok}, findings={len(self.records)}, cached={self.cached})"


def preflight(
    *,
    require: "Iterable[str] | str | None" = None,
    skip: "Iterable[str] | str | None" = None,
    strict: bool | None = None,
    raise_on_error: bool | None = None,
    quiet: bool | None = None,
    use_cache: bool = True,
    apply_env: bool = True,
    project_dir: str | None = None,
    scan: bool = False,
) -> PreflightResult:
    """Check the environment before training. See the module docstring. ``scan=True`` also scans
    the calling script (``gpudoctor scan`` of the ``__main__`` file, in bounded time): its findings
    join the checks' and block the same way; the cache entry is tied to the script's mtime."""
    start = time.perf_counter()
    for name, value in (("strict", strict), ("raise_on_error", raise_on_error), ("quiet", quiet)):
        # as for [tool.gpudoctor]: strict="false" is true in Python, so no guess; any other object
        # crashed later, in the cache write, as "not JSON serializable" (found in review)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"gpudoctor.preflight: {name} must be True, False or None, got {value!r}")
    env_changed = _apply_env_file() if apply_env else {}

    pyproject = _find_pyproject(project_dir)
    explicit = {"require": _as_list(require), "skip": _as_list(skip), "strict": strict,
                "raise_on_error": raise_on_error, "quiet": quiet}
    if scan:  # in the fingerprint: an edit of the script re-scans it
        explicit["scan"] = _script_identity()
    key = _fingerprint(pyproject, explicit)
    cache_file = os.path.join(_cache_dir(), "preflight", key + ".json")

    entry = _load_cache(cache_file) if use_cache else None
    cached = entry is not None
    config_error = None
    if entry is None:
        # NVML's child first, as soon as the miss is known: its answer (~91 ms from spawn on the
        # H200, bench/preflight_floor.py) is on this call's critical path. Spawned after tomllib,
        # the config read and the requirements' modules it started ~6.5 ms into the call on the
        # H200; on the 2-core box, with a [tool.gpudoctor] table, 23.5 ms before this, 12.2 after
        # (medians of 15). None where it would not run beside this process (nvml_query.start:
        # too few CPUs): a thread asks then.
        from .host import nvml_query

        nvml = nvml_query.start()
        try:
            notes: list[str] = []  # what of [tool.gpudoctor] is ignored, cached with the entry
            try:
                config = _read_config(pyproject, notes)
            except ConfigError as exc:
                config, config_error = {}, str(exc)
            options = _merge_options(config, explicit)
            requirements = _parse_requirements(options)  # a bad argument is the caller's error: raise
            try:
                if config_error:
                    raise ConfigError(config_error)
                entry = _run_checks(options, requirements, nvml)
                entry["notes"] = notes
            except Exception as exc:  # noqa: BLE001 - a bug in the doctor must not stop the training
                # ...but it must not read as a pass either: not_run makes ok False and the summary says so.
                why = config_error or f"{type(exc).__name__}: {exc}; please report this"
                entry = {"schema": CACHE_SCHEMA, "time": time.time(), "options": options, "checks": 0, "findings": [],
                         "blocking": {"default": [], "strict": []}, "not_run": why, "notes": notes}
            else:
                # a scan not done (no script, timed out, crashed) is retried by the next call, not
                # remembered for CACHE_TTL_S as if the script had been read
                if use_cache and not (entry.get("scan") or {}).get("error"):
                    _store_cache(cache_file, entry)
        finally:  # every way out (a bad argument, a config error, a crash): no child left behind
            _stop_nvml_child(nvml)
    for note in entry.get("notes", ()):  # every call, cached or not, quiet or not, as a miss always did
        sys.stderr.write(note)
    result = PreflightResult(entry, cached, (time.perf_counter() - start) * 1000, env_changed)
    options = result.options
    if not options.get("quiet"):
        from .report.preflight import PreflightReporter

        sys.stderr.write(PreflightReporter().render(result))
        if result.scan:
            sys.stderr.write(_scan_note(result.scan))
    blocking = result.blocking
    if config_error and options.get("raise_on_error", True):
        raise PreflightError(f"gpudoctor preflight: {config_error}", [])
    unmet = "; ".join(f"{r['feature']}: {r['status']} ({r['reason']})" for r in result.unmet_requirements)
    if (blocking or unmet) and options.get("raise_on_error", True):
        parts = []
        if blocking:
            parts.append(f"{len(blocking)} problem(s) would break training: {', '.join(r['id'] for r in blocking)}")
        if unmet:
            parts.append(f"required features not verified: {unmet}")
        raise PreflightError(
            "gpudoctor preflight: " + "; ".join(parts) + ". "
            "Run `gpudoctor check` for details, `gpudoctor fix` to fix what can be fixed without root.",
            blocking,
        )
    return result


# -- options -------------------------------------------------------------------------------


def _as_list(value) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [str(v) for v in value]


def _find_pyproject(project_dir: str | None) -> str | None:
    """The training project's pyproject.toml: from ``project_dir``, else the running script's
    directory (works from a callback too), else the working directory, walking upwards."""
    try:
        if project_dir is None:
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            project_dir = os.path.dirname(os.path.abspath(main_file)) if main_file else os.getcwd()
        directory = os.path.abspath(project_dir)
    except OSError:  # the working directory was removed (found in review: FileNotFoundError into the script)
        return None
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


class ConfigError(ValueError):
    """[tool.gpudoctor] asks for something preflight cannot do as written (a requirement that is
    not a list of strings, an unknown feature): the gate says so instead of passing without it."""


def _read_config(pyproject: str | None, notes: list[str]) -> dict:
    """The options of [tool.gpudoctor]; what is ignored is added to ``notes`` (lines for stderr),
    a request that cannot be ignored safely raises ConfigError."""
    if not pyproject:
        return {}
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(pyproject, "rb") as handle:
            document = tomllib.load(handle)
    except (OSError, ValueError) as exc:
        notes.append(f"gpudoctor preflight: ignoring {pyproject}: {exc}\n")
        return {}
    tool = document.get("tool", {})
    table = tool.get("gpudoctor", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        notes.append(f"gpudoctor preflight: ignoring [tool.gpudoctor] in {pyproject}: not a table\n")
        return {}
    config = {key.replace("-", "_"): value for key, value in table.items()}
    options = {}
    for key in CONFIG_KEYS:
        if key not in config:
            continue
        value = config[key]
        if key in BOOL_KEYS and not isinstance(value, bool):
            # `strict = "false"` is truthy in Python; guessing would turn a gate off or on by accident.
            if key == "strict":  # ignoring it would pass warnings the project asked to stop on
                raise ConfigError(f"strict = {value!r} in {pyproject} must be true or false (a TOML boolean)")
            # raise_on_error and quiet left at their defaults: the gate raises and speaks
            notes.append(f"gpudoctor preflight: ignoring {key} = {value!r} in {pyproject}: not true or false\n")
            continue
        if key in ("require", "skip") and not (isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value))):
            # a bad requirement is not dropped: the gate would pass without it
            raise ConfigError(f"{key} in {pyproject} must be a string or a list of strings, got {value!r}")
        options[key] = _as_list(value) if key in ("require", "skip") else value
    if "require" in options:
        from .requirements import RequirementError, parse_requirements

        try:
            parse_requirements(options["require"])
        except RequirementError as exc:
            raise ConfigError(f"require in {pyproject}: {exc}") from None
    if "skip" in options:
        from .selection import SelectionError, rule_ids

        try:
            rule_ids(options["skip"], option="skip")
        except SelectionError as exc:
            raise ConfigError(f"{pyproject}: {exc}") from None
    return options


def _merge_options(config: dict, explicit: dict) -> dict:
    # under torchrun & co. only rank 0 prints by default; every rank still checks and raises
    quiet_rank = os.environ.get("RANK", "0") != "0"
    options = {"require": [], "skip": [], "strict": False, "raise_on_error": True, "quiet": quiet_rank}
    options.update({k: v for k, v in config.items() if v is not None})
    options.update({k: v for k, v in explicit.items() if v is not None})
    return options


# -- environment ---------------------------------------------------------------------------


def _cache_dir() -> str:
    # the rule paths.GpudoctorDirs is built from (xdg.py), without its dataclass import
    return gpudoctor_dir(os.environ, *CACHE)


def _env_file() -> str:
    return os.path.join(gpudoctor_dir(os.environ, *CONFIG), ENV_FILE_NAME)


def _apply_env_file() -> dict:
    path = _env_file()
    if not os.path.exists(path):
        return {}
    from .fix.envfile import apply_to_os_environ

    try:
        return apply_to_os_environ(path)
    except Exception as exc:  # noqa: BLE001 - a directory, unreadable, not UTF-8: say so, go on without it
        sys.stderr.write(f"gpudoctor preflight: could not apply {path}: {exc}\n")
        return {}


def _fingerprint(pyproject: str | None, explicit: dict) -> str:
    env = os.environ
    parts: list = [CACHE_SCHEMA, _version(), sys.executable, sys.version, pyproject, explicit]
    parts.append(sorted((k, v) for k, v in env.items() if k in FINGERPRINT_VARS or k.startswith(FINGERPRINT_PREFIXES)))
    # site-packages: installing, upgrading or removing a distribution changes its mtime. Other
    # sys.path entries (the script's own dir) change whenever training writes a file there.
    site_dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    watched = [*site_dirs, *FINGERPRINT_PATHS, *env.get("LD_LIBRARY_PATH", "").split(":"), pyproject or ""]
    for path in watched:
        if path:
            try:
                st = os.stat(path)
                parts.append((path, st.st_mtime_ns, st.st_size))
            except OSError:
                parts.append((path, None))
    # Which machine, and which boot of it: nodes of a cluster share HOME (NFS, Apptainer's home
    # bind) and, from one image, every path and mtime above, so node b passed on node a's entry
    # (found in review); a reboot (a GPU back on or off the bus, /dev/shm resized) is re-checked.
    parts.append(os.uname().nodename)
    for proc_file in ("/proc/driver/nvidia/version", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(proc_file, "rb") as handle:  # /proc mtimes say nothing
                parts.append(handle.read(4096).decode("utf-8", "replace"))
        except OSError:
            parts.append(None)
    data = repr(parts).encode()  # not json.dumps: json.encoder imports re (see _read_cache_json)
    try:
        from _blake2 import blake2b  # hashlib would load OpenSSL (~2 ms)
    except ImportError:  # pragma: no cover - other Pythons
        from hashlib import blake2b
    return blake2b(data, digest_size=16).hexdigest()


def _version() -> str:
    from . import __version__

    return __version__


# -- cache ---------------------------------------------------------------------------------


def _load_cache(path: str) -> dict | None:
    """The cached entry, or None for anything unexpected (missing, corrupt, another schema,
    stale, or dated in the future: a clock set back must not keep an entry forever)."""
    try:
        # Only an entry this user wrote, in a directory nobody else can write to: a file of
        # another user's, or in a shared cache dir, could be anyone's pass (found in review).
        # stat follows a symlinked ~/.cache to the user's own scratch disk, which is fine. The
        # directory first and O_NONBLOCK: a FIFO planted at the entry's name blocked open()
        # forever (found in review); it, or a link to /dev/zero, is not a regular file: a miss.
        if not_only_yours(os.stat(os.path.dirname(path)), "the cache directory"):
            return None
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), encoding="utf-8") as handle:
            if not_only_yours(os.fstat(handle.fileno()), "the cache entry", regular=True):
                return None
            entry = _read_cache_json(handle.read())
        age = time.time() - entry["time"]
        well_formed = _well_formed(entry)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not well_formed or not 0 <= age <= CACHE_TTL_S:
        return None
    return entry


def _well_formed(entry: dict) -> bool:
    """Every field the cached path reads has the shape preflight writes: valid JSON of another
    shape (a damaged or planted file) crashed the training script in the result or the summary
    (found in review: ``"requirements": "x"`` raised AttributeError), so it is a miss instead."""
    findings, blocking, scan = entry["findings"], entry["blocking"], entry.get("scan")
    return (entry["schema"] == CACHE_SCHEMA and isinstance(entry["options"], dict)
            and isinstance(entry["checks"], int) and isinstance(findings, list)
            and all(isinstance(r, dict) and isinstance(r.get("id"), str) and r.get("severity") in _SEVERITIES
                    and isinstance(r.get("title", ""), str) and _fixes_well_formed(r.get("fixes", []))
                    for r in findings)
            and isinstance(blocking, dict)
            and all(isinstance(blocking.get(key), list) for key in ("default", "strict"))
            and all(type(i) is int and 0 <= i < len(findings) for key in ("default", "strict") for i in blocking[key])
            and isinstance(entry.get("not_run", ""), str)
            and isinstance(entry.get("notes", []), list) and all(isinstance(n, str) for n in entry.get("notes", []))
            and isinstance(entry.get("requirements", []), list)
            and all(isinstance(r, dict) and all(isinstance(r.get(k), str) for k in ("feature", "status", "reason"))
                    for r in entry.get("requirements", []))
            and (scan is None or (isinstance(scan, dict) and isinstance(scan.get("script", ""), (str, type(None)))
                                  and isinstance(scan.get("error", ""), (str, type(None)))
                                  and isinstance(scan.get("not_judged", []), list)
                                  and all(isinstance(n, str) for n in scan.get("not_judged", [])))))


_SEVERITIES = ("error", "warning", "info")


def _fixes_well_formed(fixes) -> bool:
    return isinstance(fixes, list) and all(
        isinstance(f, dict) and isinstance(f.get("kind", ""), str) and isinstance(f.get("summary", ""), str)
        for f in fixes)


class _JsonScannerContext:
    """What the C scanner of CPython's json reads from its decoder: json.loads' defaults."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _read_cache_json(text: str):
    """json.loads(text) for the cached path, through the C scanner json.loads itself uses
    (``_json.make_scanner``) without importing json: json.decoder and json.encoder import re,
    about 8 ms of a bare venv's 11 ms start-up on the 2-core box (docs/benchmarks.md), which the
    cached call would otherwise add to every training run. Bad input raises ValueError, like
    json.loads; without the C scanner (not CPython) it is json.loads."""
    try:
        from _json import make_scanner
    except ImportError:  # pragma: no cover - other Pythons
        import json

        return json.loads(text)
    try:
        value, end = make_scanner(_JsonScannerContext)(text, len(text) - len(text.lstrip()))
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value


def _store_cache(path: str, entry: dict) -> None:
    """Best effort: a read-only cache dir must not break training."""
    directory = os.path.dirname(path)
    try:
        import json  # here, not at the top: the cached path must not import it (_read_cache_json)

        from .paths import write_private_file

        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_private_file(path, json.dumps(entry).encode("utf-8"), durable=False)
        stale = sorted((os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".json")),
                       key=lambda p: os.stat(p).st_mtime)[:-CACHE_KEEP]
        for old in stale:
            os.unlink(old)
    except OSError:
        pass


def _parse_requirements(options: dict) -> dict | None:
    from .requirements import RequirementError, parse_requirements
    from .selection import SelectionError, rule_ids

    try:
        rule_ids(options.get("skip") or [], option="skip=")
        return parse_requirements(list(options.get("require") or [])) or None
    except (RequirementError, SelectionError) as exc:  # the caller's bad argument
        raise ValueError(f"gpudoctor.preflight: {exc}") from None


def _run_checks(options: dict, requirements: dict | None, nvml) -> dict:
    """The checks on this machine. ``nvml``: NVML's child process (host/nvml_query.py), started
    by preflight before anything else is imported so that it imports pynvml and initializes NVML
    on another core, beside every import below (bench/preflight_timeline.py on the H200); None
    where nvml_query.start() said no child here, and LiveHost asks in a thread instead."""
    from .host.live import LiveHost

    host = LiveHost(nvml_query=nvml)
    if nvml is None:
        host.start_nvml(child=False)  # start() said no child here; not asked twice
    # The child is stopped by preflight (_stop_nvml_child), its one owner, on every way out.
    return _checked(host, options, requirements)


def _stop_nvml_child(child) -> None:
    """Kill and reap NVML's child unless it was collected or stopped already (its pipes are then
    closed): preflight may leave before the checks take it (a bad argument, a config error,
    skip=) or after they failed. A reaped child (returncode set) is left alone: its pid may
    belong to another process by now. One owner: _run_checks stopped it too, and a child stuck
    in the driver was waited for twice (found in review)."""
    if child is not None and child.returncode is None and not child.stdout.closed:
        from .host.live import stop_child

        stop_child(child, wait_s=0.5)  # SIGKILL to its group, reaped within 0.5 s


def _checked(host, options: dict, requirements: dict | None) -> dict:
    facts = None
    if not options.get("skip"):
        # Every probe gets its own thread before the checks are imported, so their
        # subprocesses (ldconfig, compiler versions, the link test) and NVML's initialization
        # run while the import does. The threads start before anything CPU-bound runs beside
        # them: under the GIL, each start would otherwise wait for a switch (~5 ms).
        from .facts import Facts

        facts = Facts(host, requirements)
        facts.prefetch_in_background(facts.names)
    # With skip= the needed probes are only known from the checks, so they wait for the engine.
    from .engine import diagnose
    from .model import Severity
    # Imported now, while the probes' threads wait on NVML and subprocesses, rather than after
    # the checks. (Not the fix actions: the JSON form of a finding imports them for a finding with
    # a fix, and a healthy machine has none.)
    from .report.json import finding_to_json
    from .requirement_verdicts import verify_requirements

    report = diagnose(host, skip=options.get("skip") or None, requirements=requirements, facts=facts)
    findings = list(report.findings)
    scan_section = None
    if options.get("scan"):  # the calling script, judged against the same facts (bounded time, never raises)
        from .model import sort_findings
        from .scan.script import scan_script

        scanned = scan_script(options["scan"][0], report.facts)
        skipped = set(options.get("skip") or ())
        findings = sort_findings(findings + [f for f in scanned.findings if f.id not in skipped])
        scan_section = {"script": scanned.script, "not_judged": list(scanned.not_judged), "error": scanned.error}
    # Which findings block is decided here, with the model's severities, so the cached path
    # needs neither the model nor a copy of its ranks.
    blocking = {mode: [i for i, f in enumerate(findings) if f.severity.rank >= threshold.rank]
                for mode, threshold in (("default", Severity.ERROR), ("strict", Severity.WARNING))}
    verdicts = [v.to_json() for v in verify_requirements(requirements, report.checks, facts)]
    entry = {"schema": CACHE_SCHEMA, "time": time.time(), "options": options, "checks": len(report.checks),
             "findings": [finding_to_json(f) for f in findings], "blocking": blocking, "requirements": verdicts}
    if scan_section is not None:
        entry["scan"] = scan_section
    return entry


def _script_identity() -> list:
    """[path, mtime_ns, size] of the script that called preflight (the ``__main__`` file); [""]
    when there is none (an interactive session, python -c). Never sys.argv[0]: under Jupyter that is
    ipykernel_launcher.py, and its scan would pass code never looked at. Here, not in
    gpudoctor.scan, because the cached path must not import the scanner."""
    main_file = _calling_main_file()
    if not isinstance(main_file, str) or not main_file or not os.path.isfile(main_file):
        return [""]
    path = os.path.abspath(main_file)
    st = os.stat(path)
    return [path, st.st_mtime_ns, st.st_size]


def _calling_main_file():
    """The script's file: ``__main__.__file__``, unless ``__main__`` is a launcher installed with
    Python or a package (``python -m cProfile script.py``, ``pdb``, ``trace``: found in review,
    cProfile.py was scanned); then the nearest calling frame that runs as ``__main__`` from
    another file (the script, exec'd by the launcher). Interactive sessions have no such file."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if not isinstance(main_file, str) or not _is_installed_code(main_file):
        return main_file
    frame = sys._getframe(1)
    while frame is not None:
        f_globals = frame.f_globals
        candidate = f_globals.get("__file__")
        if f_globals.get("__name__") == "__main__" and isinstance(candidate, str) and candidate != main_file:
            return candidate
        frame = frame.f_back
    return None  # only the launcher runs as __main__: no script of the user's


def _is_installed_code(path: str) -> bool:
    import sysconfig

    real = os.path.realpath(path)
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(root and real.startswith(os.path.realpath(root) + os.sep) for root in roots)


def _scan_note(scan: dict) -> str:
    """What preflight(scan=True) could not do, said under the summary (never a silent pass)."""
    if scan.get("error"):
        return f"  scan of {scan.get('script') or 'the script'} NOT done: {scan['error']}\n"
    not_judged = scan.get("not_judged") or []
    lines = [f"  scanned {scan.get('script')}"]
    lines += [f"  not judged: {why}" for why in not_judged[:3]]
    if len(not_judged) > 3:
        lines.append(f"  ({len(not_judged) - 3} more: `gpudoctor scan {scan.get('script', '')}` lists them)")
    return "".join(line + "\n" for line in lines)


# -- findings ------------------------------------------------------------------------------


def _blocking(entry: dict, strict: bool) -> list[dict]:
    return [entry["findings"][i] for i in entry["blocking"]["strict" if strict else "default"]]
