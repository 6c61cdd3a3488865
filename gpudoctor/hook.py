"""``gpudoctor.preflight()``: the pre-training hook for other repositories.

Call it at the top of a training script, before torch or Triton compile anything::

    import gpudoctor
    gpudoctor.preflight(require=["bf16"])

It applies gpudoctor's user-local env file to ``os.environ``, runs the static checks (cached by
a fingerprint of the environment, so a repeat costs about a millisecond), prints a compact
summary on stderr and raises :class:`PreflightError` on error findings (warnings too with
``strict=True``) unless ``raise_on_error=False``. Options may also come from
``[tool.gpudoctor]`` in the project's ``pyproject.toml``; explicit arguments win.

The cached path imports only os, sys, json and time (no dataclasses, typing, rich or the
engine): every import here is paid by every training run.
"""

from __future__ import annotations

import _thread
import json
import os
import sys
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~1.5 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .model import Finding

CACHE_SCHEMA = 2  # 2: fixes carry their typed actions
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
# The GIL switch interval while the uncached checks run (CPython's default is 5 ms). The probe
# threads mostly wait on syscalls and subprocesses; after each one a thread must win the GIL
# back from whichever thread is importing, and with 5 ms slices those waits add up along the
# probe chains. Restored before preflight() returns. None leaves it alone.
CHECK_SWITCH_INTERVAL_S: float | None = 0.0005


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

    __slots__ = ("_records", "cached", "duration_ms", "env_changed", "checks", "options")

    def __init__(self, records: list[dict], cached: bool, duration_ms: float, env_changed: dict, checks: int,
                 options: dict) -> None:
        self._records, self.cached, self.duration_ms = records, cached, duration_ms
        self.env_changed, self.checks, self.options = env_changed, checks, options

    @property
    def findings(self) -> "list[Finding]":
        from .model import Finding

        return [Finding.from_json(r) for r in self._records]

    @property
    def ok(self) -> bool:
        return not _blocking(self._records, bool(self.options.get("strict")))

    def __repr__(self) -> str:
        return f"PreflightResult(ok={self.ok}, findings={len(self._records)}, cached={self.cached})"


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
) -> PreflightResult:
    """Check the environment before training. See the module docstring."""
    start = time.perf_counter()
    env_changed = _apply_env_file() if apply_env else {}

    pyproject = _find_pyproject(project_dir)
    explicit = {"require": _as_list(require), "skip": _as_list(skip), "strict": strict,
                "raise_on_error": raise_on_error, "quiet": quiet}
    key = _fingerprint(pyproject, explicit)
    cache_file = os.path.join(_cache_dir(), "preflight", key + ".json")

    entry = _load_cache(cache_file) if use_cache else None
    cached = entry is not None
    if entry is None:
        options = _merge_options(_read_config(pyproject), explicit)
        requirements = _parse_requirements(options)  # a bad option is the caller's error: raise
        try:
            entry = _run_checks(options, requirements)
        except Exception as exc:  # noqa: BLE001 - a bug in the doctor must not stop the training
            sys.stderr.write(f"gpudoctor preflight: could not run the checks ({type(exc).__name__}: {exc}); "
                             "continuing without them. Please report this.\n")
            entry = {"schema": CACHE_SCHEMA, "time": time.time(), "options": options, "checks": 0, "findings": []}
        else:
            if use_cache:
                _store_cache(cache_file, entry)
    options = entry["options"]
    records = entry["findings"]
    result = PreflightResult(records, cached, (time.perf_counter() - start) * 1000, env_changed, entry["checks"], options)
    if not options.get("quiet"):
        sys.stderr.write(_summary(result, options))
    blocking = _blocking(records, bool(options.get("strict")))
    if blocking and options.get("raise_on_error", True):
        ids = ", ".join(r["id"] for r in blocking)
        raise PreflightError(
            f"gpudoctor preflight: {len(blocking)} problem(s) would break training: {ids}. "
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
    if project_dir is None:
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        project_dir = os.path.dirname(os.path.abspath(main_file)) if main_file else os.getcwd()
    directory = os.path.abspath(project_dir)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read_config(pyproject: str | None) -> dict:
    if not pyproject:
        return {}
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(pyproject, "rb") as handle:
            table = tomllib.load(handle).get("tool", {}).get("gpudoctor", {})
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"gpudoctor preflight: ignoring {pyproject}: {exc}\n")
        return {}
    config = {key.replace("-", "_"): value for key, value in table.items()}
    return {key: (_as_list(config[key]) if key in ("require", "skip") else config[key])
            for key in CONFIG_KEYS if key in config}


def _merge_options(config: dict, explicit: dict) -> dict:
    # under torchrun & co. only rank 0 prints by default; every rank still checks and raises
    quiet_rank = os.environ.get("RANK", "0") != "0"
    options = {"require": [], "skip": [], "strict": False, "raise_on_error": True, "quiet": quiet_rank}
    options.update({k: v for k, v in config.items() if v is not None})
    options.update({k: v for k, v in explicit.items() if v is not None})
    return options


# -- environment ---------------------------------------------------------------------------


def _xdg(name: str, default: str) -> str:
    """Mirrors gpudoctor.paths.GpudoctorDirs (which imports dataclasses: too slow here)."""
    value = os.environ.get(name, "")
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(value if os.path.isabs(value) else os.path.join(home, default), "gpudoctor")


def _cache_dir() -> str:
    return _xdg("XDG_CACHE_HOME", ".cache")


def _env_file() -> str:
    return os.path.join(_xdg("XDG_CONFIG_HOME", ".config"), "env.sh")


def _apply_env_file() -> dict:
    path = _env_file()
    if not os.path.exists(path):
        return {}
    from .fix.envfile import apply_to_os_environ

    return apply_to_os_environ(path)


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
    try:
        with open("/proc/driver/nvidia/version", "rb") as handle:  # /proc mtimes say nothing
            parts.append(handle.read(4096).decode("utf-8", "replace"))
    except OSError:
        parts.append(None)
    data = json.dumps(parts, default=str, sort_keys=True).encode()
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
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle)
    except (OSError, ValueError):
        return None
    if entry.get("schema") != CACHE_SCHEMA or time.time() - entry.get("time", 0) > CACHE_TTL_S:
        return None
    return entry


def _store_cache(path: str, entry: dict) -> None:
    """Best effort: a read-only cache dir must not break training."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, path)
        stale = sorted((os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".json")),
                       key=lambda p: os.stat(p).st_mtime)[:-CACHE_KEEP]
        for old in stale:
            os.unlink(old)
    except OSError:
        pass


def _parse_requirements(options: dict) -> dict | None:
    from .cli.check import parse_requirements

    try:
        return parse_requirements(list(options.get("require") or [])) or None
    except Exception as exc:  # the CLI's UsageError: here it is the caller's bad argument
        raise ValueError(f"gpudoctor.preflight: bad require= option: {exc}") from None


_switch_lock = _thread.allocate_lock()  # _thread is built in: threading stays off the cached path
_switch_depth = 0
_switch_saved = 0.0


def _run_checks(options: dict, requirements: dict | None) -> dict:
    """The uncached checks with the shorter switch interval. Overlapping calls (threads) share
    one lowering: the first saves the caller's interval, the last out restores it."""
    global _switch_depth, _switch_saved
    if CHECK_SWITCH_INTERVAL_S is None:
        return _run_checks_now(options, requirements)
    with _switch_lock:
        if _switch_depth == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, CHECK_SWITCH_INTERVAL_S))
        _switch_depth += 1
    try:
        return _run_checks_now(options, requirements)
    finally:
        with _switch_lock:
            _switch_depth -= 1
            if _switch_depth == 0:
                sys.setswitchinterval(_switch_saved)


def _run_checks_now(options: dict, requirements: dict | None) -> dict:
    from .host.live import LiveHost, start_nvml_early

    host = LiveHost()
    facts = None
    if options.get("skip"):
        # With skip= the needed probes are only known from the checks, so they wait for the
        # engine as usual; the driver's NVML initialization still overlaps the import.
        start_nvml_early()
    else:
        # Every probe gets its own thread before the checks are imported, so their
        # subprocesses (ldconfig, compiler versions, the link test) and NVML's initialization
        # run while the import does. The threads start before anything CPU-bound runs beside
        # them: under the GIL, each start would otherwise wait for a switch (~5 ms).
        from .facts import Facts

        facts = Facts(host, requirements)
        facts.prefetch_in_background(facts.names)
    from .engine import diagnose
    from .report.json import finding_to_json

    report = diagnose(host, skip=options.get("skip") or None, requirements=requirements, facts=facts)
    return {"schema": CACHE_SCHEMA, "time": time.time(), "options": options, "checks": len(report.checks),
            "findings": [finding_to_json(f) for f in report.findings]}


# -- findings ------------------------------------------------------------------------------

_RANK = {"info": 0, "warning": 1, "error": 2}


def _blocking(records: list[dict], strict: bool) -> list[dict]:
    threshold = 1 if strict else 2
    return [r for r in records if _RANK.get(r.get("severity"), 0) >= threshold]


def _summary(result: PreflightResult, options: dict) -> str:
    records = result._records
    counts = {s: sum(1 for r in records if r.get("severity") == s) for s in ("error", "warning", "info")}
    how = f"{result.checks} checks, {'cached, ' if result.cached else ''}{result.duration_ms:.0f} ms"
    if result.env_changed:
        how += f", env: {', '.join(sorted(result.env_changed))}"
    loader_note = ""
    if "LD_LIBRARY_PATH" in result.env_changed:
        # the dynamic loader read LD_LIBRARY_PATH when this process started; children see the change
        loader_note = ("  note: LD_LIBRARY_PATH changed after this process started; libraries this process loads "
                       "will not see it. Start training with `gpudoctor run -- python ...` instead.\n")
    if not counts["error"] and not counts["warning"]:
        return f"gpudoctor preflight: OK ({how})\n" + loader_note
    head = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n and s != "info")
    lines = [f"gpudoctor preflight: {head} ({how})"]
    for record in records:
        if record.get("severity") == "info":
            continue
        lines.append(f"  {record['severity']:<7} {record['id']}: {record.get('title', '')}")
        fixes = record.get("fixes") or []
        kinds = {f.get("kind") for f in fixes}
        if "user" in kinds:
            lines.append("          fix without root: gpudoctor fix   (review: gpudoctor fix --dry-run)")
        elif fixes:
            lines.append(f"          fix: {fixes[0].get('summary', '')}")
    return "\n".join(lines) + "\n" + loader_note
