"""NVML is asked in a child Python process (gpudoctor/host/nvml_query.py). This machine has no
GPU, so the child's full path runs against a stand-in pynvml that replays the 2xH200 recording
(fixtures/snapshots/h200x2-baseline: every answer, the one "not supported" query included);
the real pynvml runs too, and answers "library not found" here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpudoctor.host import nvml_query
from gpudoctor.host.base import nvml_info_from_json
from gpudoctor.host.live import LiveHost, _nvml_answer
from gpudoctor.host.snapshot import SnapshotHost

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "snapshots"

# A pynvml that answers each call from the recorded NvmlInfo, as nvidia-ml-py's functions do
# (bytes or str, named tuples, NVMLError with .value), and raises NOT_SUPPORTED for what the
# recording lists as unknown.
REPLAYING_PYNVML = textwrap.dedent('''
    import json, os
    from types import SimpleNamespace

    with open(os.path.join(os.path.dirname(__file__), "record.json")) as handle:
        RECORD = json.load(handle)
    NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_NO_PERMISSION = 12, 9, 4
    NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVML_ERROR_NOT_SUPPORTED = 18, 3
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 1, 0, 1

    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value

    def _health(handle, name):
        health = RECORD["health"][handle]
        if name in dict(health["unknown"]):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return health[name]

    nvmlInit = nvmlShutdown = lambda: None
    nvmlSystemGetDriverVersion = lambda: RECORD["driver_version"]
    nvmlSystemGetCudaDriverVersion = lambda: RECORD["cuda_driver_version"]
    nvmlDeviceGetCount = lambda: len(RECORD["devices"])
    nvmlDeviceGetHandleByIndex = lambda index: index
    nvmlDeviceGetCudaComputeCapability = lambda h: tuple(RECORD["devices"][h]["compute_capability"])
    nvmlDeviceGetName = lambda h: RECORD["devices"][h]["name"].encode()
    nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=RECORD["devices"][h]["memory_total"], free=0, used=0)
    nvmlDeviceGetUUID = lambda h: _health(h, "uuid")
    nvmlDeviceGetPciInfo = lambda h: SimpleNamespace(busId=_health(h, "pci_bus_id").encode())
    nvmlDeviceGetEccMode = lambda h: (int(_health(h, "ecc_enabled")), 0)
    nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: _health(
        h, "ecc_uncorrected_volatile" if counter == NVML_VOLATILE_ECC else "ecc_uncorrected_aggregate")
    nvmlDeviceGetRetiredPagesPendingStatus = lambda h: _health(h, "retired_pages_pending")
    nvmlDeviceGetRemappedRows = lambda h: (0, _health(h, "remapped_rows_uncorrectable"),
                                           int(_health(h, "row_remap_pending")), int(_health(h, "row_remap_failure")))
    nvmlDeviceGetCurrentClocksEventReasons = lambda h: _health(h, "clocks_event_reasons")
    nvmlDeviceGetCurrPcieLinkGeneration = lambda h: _health(h, "pcie_gen_current")
    nvmlDeviceGetMaxPcieLinkGeneration = lambda h: _health(h, "pcie_gen_max")
    nvmlDeviceGetGpuMaxPcieLinkGeneration = lambda h: _health(h, "pcie_gen_gpu_max")
    nvmlDeviceGetCurrPcieLinkWidth = lambda h: _health(h, "pcie_width_current")
    nvmlDeviceGetMaxPcieLinkWidth = lambda h: _health(h, "pcie_width_max")
    nvmlDeviceGetPersistenceMode = lambda h: int(_health(h, "persistence_mode"))
    nvmlDeviceGetMigMode = lambda h: (int(_health(h, "mig_enabled")), 0)
''')


@pytest.fixture(autouse=True)
def no_pynvml_imported_here():
    """Each test imports whichever pynvml its sys.path finds (the stand-in or the real one)."""
    sys.modules.pop("pynvml", None)
    yield
    sys.modules.pop("pynvml", None)


@pytest.fixture
def replaying_pynvml(tmp_path, monkeypatch):
    record = json.loads((FIXTURES / "h200x2-baseline" / "snapshot.json").read_text())["nvml"]
    (tmp_path / "pynvml.py").write_text(REPLAYING_PYNVML)
    (tmp_path / "record.json").write_text(json.dumps(record))
    monkeypatch.syspath_prepend(str(tmp_path))  # the child is handed this sys.path
    return SnapshotHost(str(FIXTURES / "h200x2-baseline")).nvml()


def test_the_child_answers_what_the_recorded_gpus_said(replaying_pynvml):
    answer = LiveHost(nvml_query=nvml_query.spawn()).nvml()
    assert answer == replaying_pynvml
    assert answer.health[0].why_unknown("retired_pages_pending") == "not supported"


@pytest.mark.parametrize("cpus, child", [(2, False), (4, True), (64, True)])
def test_a_child_only_where_a_core_is_free_for_it(replaying_pynvml, monkeypatch, cpus, child):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(nvml_query, "_cgroup_cpu_quota", lambda: None)
    started = nvml_query.start()
    assert (started is not None) == child
    assert LiveHost(nvml_query=started).nvml() == replaying_pynvml


def test_the_child_and_an_in_process_query_agree_on_this_machine():
    # the real nvidia-ml-py: no driver here, so both say why NVML could not answer (on a GPU
    # machine two live answers differ in their clock and PCIe readings); the child's early init
    # failed on the load too, and changed nothing
    in_process = nvml_info_from_json(nvml_query.query())
    if in_process.ok:
        pytest.skip("a GPU machine: live readings change between two queries")
    assert LiveHost(nvml_query=nvml_query.spawn()).nvml() == in_process


def test_without_a_python_to_start_the_query_runs_in_process(replaying_pynvml, monkeypatch):
    monkeypatch.setattr(nvml_query, "usable_cpus", lambda: 64)
    monkeypatch.setattr(sys, "executable", "")
    assert LiveHost().nvml() == replaying_pynvml


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_a_child_that_hangs_is_killed_and_said(monkeypatch):
    monkeypatch.setattr("gpudoctor.host.live.NVML_TIMEOUT_S", 0.5)
    proc = _child("import time; time.sleep(30)")
    info = _nvml_answer(proc)
    assert (info.ok, info.error_kind) == (False, "timeout") and "did not answer within" in info.error
    assert proc.poll() is not None


def test_a_child_that_dies_of_a_signal_is_said_and_not_asked_again_here():
    info = _nvml_answer(_child("import os, signal, sys; sys.stderr.write('in nvmlInit\\n'); sys.stderr.flush(); "
                               "os.kill(os.getpid(), signal.SIGSEGV)"))
    assert (info.ok, info.error_kind) == (False, "other")
    assert info.error == "the NVML query process died of signal 11: in nvmlInit"


def test_a_child_that_cannot_start_python_hands_over_to_an_in_process_query(replaying_pynvml):
    # what `python -I -S` prints where the interpreter needs PYTHONHOME
    failed = _child("import sys; sys.stderr.write(\"Fatal Python error: init_fs_encoding: failed to get the Python "
                    "codec of the filesystem encoding\\nModuleNotFoundError: No module named 'encodings'\\n\"); sys.exit(1)")
    assert _nvml_answer(failed) is None
    assert LiveHost(nvml_query=_child("import sys; sys.exit(1)")).nvml() == replaying_pynvml


def test_the_child_gets_the_parents_path_in_order_and_only_what_imports_can_use(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", "relative/dir", Path("/opt/lib"), b"/opt/bytes", 42, *sys.path[:3]])
    assert nvml_query._importable_path() == [str(tmp_path), str(tmp_path / "relative/dir"), "/opt/lib", "/opt/bytes",
                                             *[os.path.abspath(p) for p in sys.path[5:8]]]
    proc = nvml_query.spawn()  # no TypeError from a Path or bytes entry
    proc.kill()
    proc.communicate()


def test_the_path_goes_through_stdin_not_the_public_command_line(monkeypatch):
    proc = nvml_query.spawn()
    try:
        assert proc.args == [sys.executable, "-I", "-S", os.path.abspath(nvml_query.__file__)]
        assert proc.stdin is None  # written and closed at start: the child reads to the end
    finally:
        proc.kill()
        proc.communicate()
    monkeypatch.setattr(sys, "path", [f"/opt/env{i:05d}/lib/python3/site-packages" for i in range(2000)])
    monkeypatch.setattr(nvml_query, "usable_cpus", lambda: 64)
    assert nvml_query.start() is None  # too long for one pipe buffer: the query stays in a thread


@pytest.mark.parametrize("executable, frozen", [("", False), ("/usr/bin/uwsgi", False), ("/opt/app/train", True)])
def test_no_child_where_sys_executable_is_not_a_plain_python(monkeypatch, executable, frozen):
    monkeypatch.setattr(nvml_query, "usable_cpus", lambda: 64)
    monkeypatch.setattr(sys, "executable", executable)
    monkeypatch.setattr(sys, "frozen", frozen, raising=False)
    assert nvml_query.start() is None


def test_a_child_that_prints_without_end_is_stopped(monkeypatch):
    monkeypatch.setattr(nvml_query, "MAX_ANSWER_BYTES", 1 << 16)
    info = _nvml_answer(_child("import sys\nwhile True: sys.stdout.write('x' * 65536)"))
    assert (info.ok, info.error_kind, info.error) == (False, "other", "the NVML query process printed over 65536 bytes; stopped it")


def test_a_query_never_collected_leaves_no_process_behind(replaying_pynvml):
    proc = nvml_query.spawn()
    host = LiveHost(nvml_query=proc)
    host.discard_nvml()
    assert proc.returncode is not None and proc.stdout.closed and proc.stderr.closed
    late = host.nvml()  # a probe thread asking after preflight returned starts nothing
    assert (late.ok, late.error) == (False, "the NVML query was stopped: preflight had finished")


def test_preflight_reaps_its_nvml_child_even_when_the_checks_fail(monkeypatch, tmp_path):
    import gpudoctor.hook as hook

    started = []
    real_spawn = nvml_query.spawn
    monkeypatch.setattr(nvml_query, "usable_cpus", lambda: 64)
    monkeypatch.setattr(nvml_query, "spawn", lambda: started.append(real_spawn()) or started[-1])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def checks_that_fail(host, options, requirements):
        raise RuntimeError("a bug in the doctor")

    monkeypatch.setattr(hook, "_checked", checks_that_fail)
    result = hook.preflight(quiet=True, raise_on_error=False, use_cache=False, apply_env=False)
    assert "a bug in the doctor" in result.not_run
    assert len(started) == 1 and started[0].returncode is not None


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "max 100000\n"}, None),                       # cgroup v2, no limit
    ({"cpu.max": "200000 100000\n"}, 2),                       # docker --cpus 2
    ({"cpu.max": "150000 100000\n"}, 2),                       # 1.5 CPUs: rounded up
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),  # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),   # v1, no limit
    ({}, None),                                                 # no cgroup files (not Linux, or masked)
    ({"cpu.max": "garbage"}, None),
])
def test_a_cgroup_cpu_quota_lowers_the_cpus_counted(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert nvml_query._cgroup_cpu_quota(str(tmp_path)) == quota


def test_a_pod_limited_to_two_cpus_on_a_big_node_gets_no_child(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(nvml_query, "_cgroup_cpu_quota", lambda: 2)
    assert nvml_query.usable_cpus() == 2 and nvml_query.start() is None


# A libnvidia-ml.so.1 stand-in for the child's early init (_begin_nvml_init): the real pynvml loads
# it by that name (LD_LIBRARY_PATH); each NVML call it exports is logged as it returns, with the
# process and thread that made it. nvmlInitWithFlags answers $FAKE_NVML_INIT (an NVML return
# code, 9 is NVML_ERROR_DRIVER_NOT_LOADED), its first call taking 200 ms as a real first init takes
# its time and a second returns at once (so pynvml's init logged first would mean it did not wait
# for the early one), the driver version 999 (NVML_ERROR_UNKNOWN). Built without
# nvmlInitWithFlags (-DNO_INIT) it is a library the early init cannot call at all.
FAKE_LIBNVIDIA_ML = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void logged(const char *call) {
    FILE *log = fopen(getenv("FAKE_NVML_LOG"), "a");
    fprintf(log, "%s %d %ld\n", call, (int) getpid(), (long) syscall(SYS_gettid));
    fclose(log);
}
#ifndef NO_INIT
static int inits;
int nvmlInitWithFlags(unsigned int flags) {
    if (inits++ == 0) usleep(200000);
    logged("init");
    return atoi(getenv("FAKE_NVML_INIT"));
}
#endif
int nvmlShutdown(void) { logged("shutdown"); return 0; }
int nvmlSystemGetDriverVersion(char *version, unsigned int length) { logged("driver"); return 999; }
"""


def _fake_libnvidia_ml(directory: Path, *flags: str) -> Path:
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the stand-in libnvidia-ml.so.1")
    directory.mkdir()
    (directory / "fake.c").write_text(FAKE_LIBNVIDIA_ML)
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(directory / "libnvidia-ml.so.1"),
                    str(directory / "fake.c")], check=True, capture_output=True)
    return directory


def _calls(log: Path) -> list[tuple[str, str]]:
    """The logged NVML calls in order, each as (call, "main" or "other" thread)."""
    lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return [(call, "main" if pid == tid else "other") for call, pid, tid in lines]


@pytest.mark.parametrize("init_returns, no_init, answer, child_calls", [
    # NVML initializes: the child's early init (another thread) first, pynvml's own after it
    ("0", False, ("other", "Unknown Error"),
     [("init", "other"), ("init", "main"), ("driver", "main"), ("shutdown", "main")]),
    # the driver is not loaded: the early init's error is ignored, pynvml's init reports it
    ("9", False, ("driver-not-loaded", "Driver Not Loaded"), [("init", "other"), ("init", "main")]),
    # a library without nvmlInitWithFlags: the early init raises (ignored), pynvml says so
    ("0", True, ("other", "Function Not Found"), []),
])
def test_the_childs_early_init_runs_beside_and_changes_no_answer(tmp_path, monkeypatch, init_returns, no_init,
                                                                answer, child_calls):
    library = _fake_libnvidia_ml(tmp_path / "driver", *(["-DNO_INIT"] if no_init else []))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(library))  # read when each process starts
    monkeypatch.setenv("FAKE_NVML_INIT", init_returns)
    monkeypatch.setenv("FAKE_NVML_LOG", str(tmp_path / "child.log"))
    from_the_child = LiveHost(nvml_query=nvml_query.spawn()).nvml()

    # the same query in-process (no early init), in a fresh process that loads the same library
    monkeypatch.setenv("FAKE_NVML_LOG", str(tmp_path / "in-process.log"))
    in_process = subprocess.run(
        [sys.executable, "-c", "import json; from gpudoctor.host import nvml_query; print(json.dumps(nvml_query.query()))"],
        capture_output=True, text=True, check=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert from_the_child == nvml_info_from_json(json.loads(in_process.stdout))
    assert (from_the_child.ok, from_the_child.error_kind, from_the_child.error) == (False, *answer)
    assert _calls(tmp_path / "child.log") == child_calls
    assert _calls(tmp_path / "in-process.log") == [call for call in child_calls if call[1] == "main"]

