"""The distributed check with real local processes: rank 0 gathers every rank's report through
torch's rendezvous store, finds the rank whose environment differs, and reports a dead rank
within the timeout instead of hanging."""

import pytest

pytest.importorskip("torch.distributed")

from ranks import launch  # noqa: E402


def _findings(report, rule_id):
    return [f for f in report["findings"] if f["id"] == rule_id]


def test_one_rank_with_another_environment_gives_ranks_differ():
    runs = launch(3, ["--json", "--rank-timeout", "30", "--fail-on", "warning"],
                  env_of={2: {"NCCL_P2P_DISABLE": "1", "LD_LIBRARY_PATH": "/opt/other-cuda/lib64"}})
    assert runs[1].returncode == 0 and runs[1].stdout == "", runs[1].stderr  # only rank 0 prints
    assert runs[2].returncode == 0 and runs[2].stdout == "", runs[2].stderr
    report = runs[0].json()
    assert runs[0].returncode == 1, runs[0].stderr  # warnings fail with --fail-on warning
    differ = {f["evidence"]["fact"]: f for f in _findings(report, "ranks-differ")}
    assert set(differ) == {"$NCCL_P2P_DISABLE", "$LD_LIBRARY_PATH"}
    assert differ["$NCCL_P2P_DISABLE"]["evidence"]["values"] == {"absent": [0, 1], "1": [2]}
    assert "rank 2 on" in differ["$NCCL_P2P_DISABLE"]["message"]
    assert differ["$NCCL_P2P_DISABLE"]["severity"] == "warning"
    assert [r["rank"] for r in report["ranks"]] == [0, 1, 2]
    assert all(r["reachable"] and "host" in r and "local_rank" in r and "findings" in r for r in report["ranks"])
    assert report["distributed"]["world_size"] == 3
    assert "torch" in report["distributed"]["identical"]  # what is the same is said once
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["ranks-differ"] == "fail" and statuses["rank-unreachable"] == "pass"


def test_identical_ranks_pass():
    runs = launch(2, ["--json", "--rank-timeout", "30"])
    report = runs[0].json()
    assert not _findings(report, "ranks-differ") and not _findings(report, "rank-unreachable")
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["ranks-differ"] == "pass" and statuses["rank-unreachable"] == "pass"


def test_sleeping_rank_is_reported_unreachable_within_the_timeout():
    timeout = 4.0
    runs = launch(3, ["--json", "--rank-timeout", str(timeout)], sleepers=(1,), timeout_s=45)
    report = runs[0].json()
    assert runs[0].returncode == 1
    (lost,) = _findings(report, "rank-unreachable")
    assert lost["evidence"]["ranks"] == [1] and lost["severity"] == "error"
    assert f"within {timeout:g} s" in lost["message"]
    # Rank 0 waited for the timeout, not for the sleeper: start-up and probes take a few seconds
    # on a loaded 2-core box, the sleeper would have held it 120 s.
    assert runs[0].elapsed_s < timeout + 25, runs[0].elapsed_s
    assert {r["rank"]: r["reachable"] for r in report["ranks"]} == {0: True, 1: False, 2: True}
    assert runs[2].returncode == 0  # the live rank finished too


def test_rank_that_loses_rank_zero_reports_it():
    runs = launch(2, ["--json", "--rank-timeout", "3"], sleepers=(0,), timeout_s=45)
    report = runs[1].json()  # nobody else would print: rank 1 reports what it saw
    (lost,) = _findings(report, "rank-unreachable")
    assert lost["evidence"]["ranks"] == [0]
    assert "127.0.0.1:" in lost["message"]
    assert runs[1].returncode == 1


def test_nproc_launches_torchrun_and_rank_zero_reports_for_all(capfd):
    from gpudoctor.cli.main import main

    code = main(["check", "--nproc", "2", "--json", "--rank-timeout", "30", "--fail-on", "error"])
    report = __import__("json").loads(capfd.readouterr().out)  # rank 0 writes to the inherited fd
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert report["distributed"]["launcher"] == "torchrun"
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert code == (1 if errors else 0)  # the check's exit code, not torchrun's
