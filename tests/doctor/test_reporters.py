"""Reporters: the header never probes, one CLI grammar, output made for copying (issues 12, 13)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpudoctor.cli.main import main
from gpudoctor.engine import diagnose
from gpudoctor.facts import Facts
from gpudoctor.host import SnapshotHost
from gpudoctor.report.summary import machine_summary
from gpudoctor.report.text import format_bytes

SNAPSHOT = "fixtures/snapshots/h200-baseline"


class CountingHost:
    """A recorded machine that counts the commands it is asked to run."""

    def __init__(self, inner):
        self._inner, self.commands = inner, []

    def run(self, argv, *args, **kwargs):
        self.commands.append(tuple(argv))
        return self._inner.run(argv, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_the_header_never_probes(tmp_path):
    host = CountingHost(SnapshotHost(SNAPSHOT))
    report = diagnose(host, only=["bf16-unsupported"], facts=Facts(host))
    before = list(host.commands)
    lines = machine_summary(report.facts)
    assert host.commands == before  # printing ran nothing
    assert any(line.startswith("GPU 0:") for line in lines)
    assert not any("CUDA toolkit" in line for line in lines)  # the toolchain was never probed


@pytest.mark.parametrize("argv", [["--only", "bogus"], ["--skip", "bogus"], ["--require", "fp8"],
                                  ["--only", "cuda-oom"]])
def test_bad_selections_are_usage_errors(argv, capsys):
    assert main(["check", "--snapshot", SNAPSHOT, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error:") and err.count("\n") == 1


def test_one_grammar_and_check_is_the_default(capsys):
    assert main(["--snapshot", SNAPSHOT, "--json", "--only", "bf16-unsupported", "triton-missing"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert sorted(c["id"] for c in data["checks"]) == ["bf16-unsupported", "triton-missing"]
    assert main(["--snapshot", SNAPSHOT, "--json", "--only", "bf16-unsupported,triton-missing"]) in (0, 1)
    assert len(json.loads(capsys.readouterr().out)["checks"]) == 2


def test_piped_output_is_not_wrapped_nor_coloured():
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--snapshot", SNAPSHOT, "-v"],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "COLUMNS": "40", "HOME": "/nonexistent-home", "TERM": "xterm"})
    assert out.returncode in (0, 1), out.stderr
    assert "\x1b[" not in out.stdout
    gpu = [line for line in out.stdout.splitlines() if "GPU 0:" in line]
    assert gpu and len(gpu[0]) > 40 and "driver" in gpu[0]  # longer than COLUMNS, still one line


def test_explain_and_run_print_through_reporters(capsys):
    """explain's terminal and JSON output and run's diagnosis come from reporters (issue 12 item 3):
    explain --json is the one envelope, and the run reporter renders the same findings."""
    import glob

    from gpudoctor.logs import diagnose_paths
    from gpudoctor.report.base import ReportView
    from gpudoctor.report.run import RunReporter
    from gpudoctor.report.explain import ExplainReporter

    log = sorted(glob.glob("fixtures/logs/cuda-oom/*"))[0]
    findings = tuple(diagnose_paths([log], machine=None))
    assert findings
    assert main(["explain", "--no-probe", "--json", log]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"schema", "tool", "findings", "checks"}
    assert [f["id"] for f in payload["findings"]] == [f.id for f in findings]
    assert main(["explain", "--no-probe", log]) == 1
    assert capsys.readouterr().out == ExplainReporter([log]).render(ReportView(findings))
    text = RunReporter(3, 40).render(ReportView(findings))
    assert "the command exited 3; diagnosing the last 40 lines" in text
    assert f"{findings[0].id}: {findings[0].title}" in text
    assert "no known failure recognised" in RunReporter(1, 2).render(ReportView(()))


@pytest.mark.parametrize("n,text", [(None, "?"), (100, "100 B"), (512 << 10, "512 KiB"), (1 << 20, "1 MiB"),
                                    (482718720, "460 MiB"), (1 << 30, "1 GiB"), (3 << 29, "1.5 GiB"),
                                    (int(1.234 * 2**30), "1.23 GiB"), (int(79.2 * 2**30), "79.2 GiB"),
                                    # never four digits: a value that would round to 1000 or more reads in the next unit
                                    (int(1023.6 * 2**20), "1 GiB"), (int(999.4 * 2**20), "999 MiB"),
                                    (1023, "1 KiB"), (int(9.999 * 2**20), "10 MiB")])
def test_one_way_to_write_a_byte_count(n, text):
    """NCCL message sizes, FSDP peak memory and the training pass's peak memory are all written
    by format_bytes: binary units, three significant digits, trailing zeros dropped."""
    assert format_bytes(n) == text


def test_a_byte_count_not_measured_says_so_in_the_callers_words():
    assert format_bytes(None, "n/a") == "n/a"


def test_no_torch_in_a_replayed_snapshot_says_how_to_record_the_right_interpreter():
    """--python does not go with --snapshot (exit 2): the header names the option that would help."""
    report = diagnose(SnapshotHost("fixtures/snapshots/cpu-triton35-driver-without-unversioned"))
    (line,) = [line for line in machine_summary(report.facts) if "no torch" in line]
    assert "`gpudoctor snapshot --python PATH` records the one you train with" in line
