"""The torch-free parts: rank discovery, the comparison, `gpudoctor diff`, NCCL's log lines and
the bandwidth judgement on the figures measured on the 2x H200 device machine."""

import json
import os
import sys

import pytest

from gpudoctor.cli.main import main
from gpudoctor.distributed.compare import Member, Missing, compare, describe
from gpudoctor.distributed.environment import NotDistributed, discover, first_slurm_host
from gpudoctor.distributed.nccl_judge import judge_nccl
from gpudoctor.distributed.nccl_parse import link_bandwidth, parse_nccl_info
from gpudoctor.distributed.rankfacts import Compared, rank_gpu_index
from gpudoctor.model import CheckStatus, Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SNAPSHOTS = os.path.join(ROOT, "fixtures", "snapshots")
RESULTS = os.path.join(ROOT, "bench", "results")


# -- who am I ----------------------------------------------------------------------------------

def test_torchrun_variables():
    env = discover({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node-a", "MASTER_PORT": "29500",
                    "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert (env.rank, env.world_size, env.local_rank, env.launcher, env.agent_store, env.run_id) == \
        (3, 8, 1, "torchrun", True, "abc")


def test_pytorchjob_variables_have_no_local_rank():
    env = discover({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"})
    assert (env.local_rank, env.launcher, env.agent_store, env.master_addr) == (0, "env", False, "job-master-0")


def test_slurm_variables_and_first_host():
    env = discover({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "77",
                    "SLURM_JOB_NODELIST": "gpu[03-05,09],cpu1"})
    assert (env.rank, env.world_size, env.local_rank, env.master_addr, env.master_port, env.launcher) == \
        (5, 8, 1, "gpu03", 29500, "slurm")
    assert first_slurm_host("node17") == "node17"


@pytest.mark.parametrize("env", [{}, {"RANK": "0", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "a",
                                                                        "MASTER_PORT": "1"},
                                 {"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"},
                                 {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "99999"}])
def test_bad_or_missing_variables(env):
    with pytest.raises(NotDistributed):
        discover(env)


def test_cuda_visible_devices_maps_the_local_rank():
    assert rank_gpu_index(None, 1) == 1
    assert rank_gpu_index("4,5", 1) == 5
    assert rank_gpu_index("4", 1) is None  # fewer visible GPUs than local ranks
    assert rank_gpu_index("", 0) is None


# -- the comparison ----------------------------------------------------------------------------

def _member(rank, host, **facts):
    base = {"torch": Compared("version", "2.5.1"), "$NCCL_DEBUG": Compared("env", "WARN"),
            "GPU index": Compared("placement", str(rank % 2))}
    base.update({k.replace("__", " "): Compared(kind, value) for k, (kind, value) in facts.items()})
    return Member(f"rank {rank}", host, base, rank=rank, local_rank=rank % 2)


def test_version_difference_is_an_error_naming_ranks_and_hosts():
    members = [_member(0, "a"), _member(1, "a"), _member(2, "b", torch=("version", "2.4.0")),
               _member(3, "b", torch=("version", "2.4.0"))]
    comparison = compare(members)
    (differ,) = [f for f in comparison.findings if f.id == "ranks-differ"]
    assert differ.severity == Severity.ERROR
    assert "2.5.1 on ranks 0-1 on a; 2.4.0 on ranks 2-3 on b" in differ.message
    assert comparison.identical["$NCCL_DEBUG"] == "WARN"
    # placement is shown, never a finding
    assert [d.key for d in comparison.differences] == ["torch", "GPU index"]


def test_missing_rank_and_merged_checks():
    comparison = compare([_member(0, "a"), _member(2, "a")], [Missing(1, "no report arrived")], timeout_s=5)
    (lost,) = [f for f in comparison.findings if f.id == "rank-unreachable"]
    assert lost.evidence["ranks"] == [1] and "within 5 s" in lost.message
    statuses = {c.id: c.status for c in comparison.checks}
    assert statuses == {"ranks-differ": CheckStatus.PASS, "rank-unreachable": CheckStatus.FAIL}


def test_describe_ranges():
    members = [_member(r, "a" if r < 4 else "b") for r in (0, 1, 2, 3, 5, 7)]
    assert describe(members) == "ranks 0-3 on a, ranks 5,7 on b"


# -- gpudoctor diff ----------------------------------------------------------------------------

def test_diff_same_machine_twice_exits_0(capsys):
    assert main(["diff", os.path.join(SNAPSHOTS, "h200-baseline"), os.path.join(SNAPSHOTS, "h200-baseline-recorder2")]) == 0
    assert "No differences" in capsys.readouterr().out


def test_diff_stub_on_library_path_exits_1_with_json(capsys):
    code = main(["diff", "--json", os.path.join(SNAPSHOTS, "h200-baseline"),
                 os.path.join(SNAPSHOTS, "h200-stub-on-ld-library-path")])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["schema"] == 1 and data["diff"]["same"] is False
    assert [d["fact"] for d in data["diff"]["differences"]] == ["$LD_LIBRARY_PATH"]
    stub = [f for f in data["findings"] if f["id"] == "libcuda-stub-at-runtime"]
    assert stub and stub[0]["evidence"]["ranks"] == ["B"]


def test_diff_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["diff", str(tmp_path / "nope"), os.path.join(SNAPSHOTS, "h200-baseline")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error:") and err.count("\n") == 1


# -- NCCL --------------------------------------------------------------------------------------

# Real lines: an nccl-tests all_reduce_perf run on 2x A100-SXM4-80GB in a container (NCCL 2.20.5),
# and the P2P-disabled and socket transports as NCCL 2.2x prints them.
NCCL_LINES = """\
NCCL version 2.20.5+cuda12.4
3767c65d25c4:855:866 [2] NCCL INFO NET/IB : No device found.
3767c65d25c4:855:866 [2] NCCL INFO Using network Socket
3767c65d25c4:855:864 [0] NCCL INFO Channel 00/24 :    0   1   2   3
3767c65d25c4:880:888 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/direct pointer/read
3767c65d25c4:880:887 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer/read
node-01:1896458:1896480 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
node-01:1897709:1897731 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
3767c65d25c4:880:887 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
"""


def test_nccl_info_lines():
    parsed = parse_nccl_info(NCCL_LINES)
    assert parsed["nccl_version"] == "2.20.5+cuda12.4"
    assert parsed["network"] == "Socket"
    assert parsed["transports"] == {"P2P/direct pointer/read": 2, "SHM/direct/direct": 1, "NET/Socket": 1}
    assert parsed["set_by_environment"] == {"NCCL_P2P_DISABLE": "1"}


def test_link_bandwidth_from_nvml_answers():
    # An H200 answers NVML_NVLINK_VERSION_4_0 (6) on 18 links (the device run's rank payload)
    assert link_bandwidth({"nvlink_active": 18, "nvlink_version": 6})[0] == 450.0
    assert link_bandwidth({"nvlink_active": 0, "pcie_gen_max": 4, "pcie_width_max": 16})[0] == pytest.approx(31.5, 0.01)
    assert link_bandwidth({"nvlink_active": 4, "nvlink_version": 99})[0] is None


def _recorded(name):
    with open(os.path.join(RESULTS, name), encoding="utf-8") as handle:
        data = json.load(handle)
    return {"ranks": {int(r): v for r, v in data["nccl"]["ranks"].items()}, "missing": data["nccl"]["missing"]}


def test_measured_nvlink_bandwidth_passes():
    findings, (check,) = judge_nccl(_recorded("distributed-h200x2-nproc2-nccl.json"))
    assert findings == [] and check.status == CheckStatus.PASS
    assert "of 450 GB/s (18 NVLink 4 links" in check.reason


def test_measured_p2p_disabled_bandwidth_is_low_and_names_the_cause():
    findings, (check,) = judge_nccl(_recorded("distributed-h200x2-nproc2-p2p-disabled.json"))
    (low,) = findings
    assert low.id == "nccl-bandwidth-low" and check.status == CheckStatus.FAIL
    assert "NCCL_P2P_DISABLE=1 is set" in low.message
    assert low.evidence["measured_busbw_gbs"] < 0.4 * low.evidence["expected_gbs"]


def test_a_hung_measurement_is_a_finding():
    findings, (check,) = judge_nccl({"ranks": {0: {"error": "did not finish within 60 s", "timed_out": True}},
                                     "missing": [1]})
    assert findings[0].id in ("nccl-timeout", "nccl-failure") and check.status == CheckStatus.SKIP


def test_static_path_never_imports_torch():
    import subprocess

    code = ("import sys; from gpudoctor.cli.main import main; main(['check', '--exit-zero', '--snapshot', "
            f"{os.path.join(SNAPSHOTS, 'h200x2-baseline')!r}]); "
            "sys.exit(1 if 'torch' in sys.modules or 'torch.distributed' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.parametrize("value", ["0", "-1"])
def test_nproc_below_one_is_a_usage_error_not_a_plain_check(value, capsys):
    from gpudoctor.cli.main import main

    assert main(["check", "--nproc", value]) == 2
    assert "--nproc must be at least 1" in capsys.readouterr().err
