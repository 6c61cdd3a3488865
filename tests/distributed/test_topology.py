"""`nvidia-smi topo -m` in the NCCL judgement: the matrix parsed from real outputs
(fixtures/distributed/topology/README.md names each source), the measured pair's connection in
the report and the verdict, and the bounded run on a machine without nvidia-smi."""

from __future__ import annotations

import copy
import json
import os
import socket

import pytest

from gpudoctor.distributed.nccl_judge import _likely_causes, judge_nccl, measured_link, nccl_lines
from gpudoctor.distributed.nccl_topology import (
    TOPO_ARGV,
    connection,
    describe,
    parse_topology,
    run_topology,
    weakest_pair,
)
from gpudoctor.host.base import CommandResult
from gpudoctor.model import CheckStatus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPOLOGY = os.path.join(ROOT, "fixtures", "distributed", "topology")
RESULTS = os.path.join(ROOT, "bench", "results")


def _text(name: str) -> str:
    with open(os.path.join(TOPOLOGY, name), encoding="utf-8") as handle:
        return handle.read()


def _recorded(name: str, topology_file: str | None) -> dict:
    """A recorded 2x H200 NCCL run (bench/results), with the matrix and GPU indices that run
    predates: the matrix recorded on the same machine, rank r on GPU r (the run's rank table)."""
    with open(os.path.join(RESULTS, name), encoding="utf-8") as handle:
        data = json.load(handle)
    ranks = {int(r): copy.deepcopy(v) for r, v in data["nccl"]["ranks"].items()}
    for rank, value in ranks.items():
        value["gpu_index"] = rank
    if topology_file:
        ranks[0]["topology"] = parse_topology(_text(topology_file))
    return {"ranks": ranks, "missing": data["nccl"]["missing"]}


# -- the matrix --------------------------------------------------------------------------

def test_h200_matrix_with_its_ansi_header():
    text = _text("h200x2-nvidia-smi-580.txt")
    assert text.startswith("\x1b[4m\tGPU0")
    topology = parse_topology(text)
    assert topology["devices"] == ["GPU0", "GPU1"]
    assert connection(topology, 0, 1) == connection(topology, 1, 0) == "NV18"
    assert topology["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "0-31"}
    assert topology["numa_affinity"] == {"GPU0": "0", "GPU1": "0"}
    assert describe("NV18") == "a bonded set of 18 NVLinks"


def test_nic_columns_and_rows_are_devices_too():
    topology = parse_topology(_text("8gpu-nv18-9nic-nccl-1453.txt"))
    assert topology["devices"][-1] == "NIC8" and len(topology["devices"]) == 17
    assert topology["links"]["GPU0"]["NIC8"] == "PIX" and topology["links"]["NIC5"]["GPU3"] == "PIX"
    assert topology["cpu_affinity"]["GPU4"] == "80-159" and "NIC0" not in topology["cpu_affinity"]
    assert weakest_pair(topology, list(range(8))) == (6, 7, "NV18")


def test_space_separated_pastes_and_the_farthest_pair():
    pcie = parse_topology(_text("8gpu-pix-node-sys-nccl-1817.txt"))
    assert connection(pcie, 0, 1) == "PIX" and connection(pcie, 0, 2) == "NODE" and connection(pcie, 3, 7) == "SYS"
    assert weakest_pair(pcie, [0, 1]) == (0, 1, "PIX")
    assert weakest_pair(pcie, [0, 1, 2]) == (1, 2, "NODE")
    assert weakest_pair(pcie, [0, 1, 2, 3]) == (1, 3, "NODE")  # of four NODE pairs, the last
    sys_pairs = parse_topology(_text("8gpu-sys-10nic-deepep-128.txt"))
    assert weakest_pair(sys_pairs, [0, 1]) == (0, 1, "SYS")
    assert weakest_pair(sys_pairs, [6, 7]) is None  # the paste ends before GPU6's row
    assert connection(parse_topology(_text("rtx5090x2-phb-club-3090-1229.txt")), 0, 1) == "PHB"


def test_no_matrix_is_said_not_guessed():
    assert "error" in parse_topology("No devices were found\n")
    assert "error" in parse_topology("")


def test_the_run_is_bounded_and_never_raises():
    text = _text("h200x2-nvidia-smi-580.txt")
    seen = []

    def replay(argv, timeout):
        seen.append((argv, timeout))
        return CommandResult(argv, 0, text, "")

    topology = run_topology(replay)
    assert seen == [(TOPO_ARGV, 10.0)] and topology["links"]["GPU0"]["GPU1"] == "NV18" and topology["text"] == text
    missing = run_topology(lambda argv, timeout: CommandResult(argv, None, error="not-found"))
    assert missing == {"error": "nvidia-smi not found"}
    hung = run_topology(lambda argv, timeout: CommandResult(argv, None, timed_out=True))
    assert hung["error"] == "nvidia-smi topo -m timed out"


# -- the judgement -----------------------------------------------------------------------

def test_measured_nvlink_pass_names_the_pair():
    results = _recorded("distributed-h200x2-nproc2-nccl.json", "h200x2-nvidia-smi-580.txt")
    findings, (check,) = judge_nccl(results)
    assert findings == [] and check.status == CheckStatus.PASS
    assert "of 450 GB/s (18 NVLink 4 links" in check.reason
    assert "GPUs 0 and 1: NV18 (a bonded set of 18 NVLinks)" in check.reason
    lines = nccl_lines(results)
    assert "  topology (nvidia-smi topo -m), farthest measured pair: GPUs 0 and 1: NV18 (a bonded set of 18 NVLinks)" in lines
    # message sizes in binary units (report.text.format_bytes): the sizes are powers of two
    assert check.reason.startswith("all-reduce 1 GiB: 330.05 GB/s bus bandwidth")
    assert "  all-reduce bus bandwidth GB/s: 1 MiB 30.08, 8 MiB 167.56, 64 MiB 263.25, 256 MiB 290.03, 1 GiB 330.05" in lines


def test_p2p_disabled_on_nvlink_blames_the_variable_not_the_topology():
    findings, (check,) = judge_nccl(_recorded("distributed-h200x2-nproc2-p2p-disabled.json", "h200x2-nvidia-smi-580.txt"))
    (low,) = findings
    assert check.status == CheckStatus.FAIL and low.evidence["topology"] == {"gpus": (0, 1), "connection": "NV18"}
    assert "NCCL_P2P_DISABLE=1 is set" in low.message and "connected through" not in low.message


def test_without_a_matrix_the_judgement_is_as_before():
    findings, (check,) = judge_nccl(_recorded("distributed-h200x2-nproc2-nccl.json", None))
    assert check.status == CheckStatus.PASS and "GPUs 0 and 1" not in check.reason
    assert measured_link(_recorded("distributed-h200x2-nproc2-nccl.json", None)["ranks"]) is None


def test_a_pair_across_sockets_is_judged_against_pcie_and_named_as_a_cause():
    # DeepEP#128's matrix joins GPUs 0 and 1 through SYS. With the NVML link answers of the
    # H200 ranks (18 active NVLinks, which lead elsewhere on such a machine), the pair is judged
    # against its PCIe gen 5 x16 link, not NVLink: the P2P-disabled run's 29.61 GB/s is then
    # 47% of 63 GB/s, not 7% of 450.
    results = _recorded("distributed-h200x2-nproc2-p2p-disabled.json", "8gpu-sys-10nic-deepep-128.txt")
    findings, (check,) = judge_nccl(results)
    assert findings == [] and check.status == CheckStatus.PASS
    assert "(PCIe gen 5 x16)" in check.reason and "GPUs 0 and 1: SYS" in check.reason
    causes = _likely_causes(results["ranks"], measured_link(results["ranks"]))
    assert causes[0].startswith("GPUs 0 and 1 are connected through SYS (PCIe and the SMP interconnect between NUMA "
                                "nodes (across CPU sockets, e.g. QPI/UPI))")


def test_unknown_gpu_index_leaves_the_pair_unjudged():
    results = _recorded("distributed-h200x2-nproc2-nccl.json", "h200x2-nvidia-smi-580.txt")
    results["ranks"][1]["gpu_index"] = None  # CUDA_VISIBLE_DEVICES by UUID: not mapped without NVML
    assert measured_link(results["ranks"]) is None


# -- the runner, end to end on this machine (gloo, no nvidia-smi) -------------------------

def test_runner_records_the_topology_or_why_not(monkeypatch):
    pytest.importorskip("torch")
    import torch.distributed as dist

    from gpudoctor.distributed.environment import RankEnv
    from gpudoctor.distributed.nccl_runner import run_nccl_measurement

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)  # the child connects to it as rank 0 of 1
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(name, value)  # what torchrun sets; the child reads them
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = RankEnv(rank=0, world_size=1, local_rank=0, master_addr="127.0.0.1", master_port=port,
                  launcher="env", host="test", run_id="topology")
    result = run_nccl_measurement(env, 120)
    del store
    assert result.get("error") is None, result
    # gloo on a machine without a GPU (CI), NCCL on the GPU machine (where the matrix is recorded)
    assert result["backend"] in ("gloo", "nccl") and result["gpu_index"] == 0
    assert "links" in result["topology"] or result["topology"]["error"].startswith("nvidia-smi")
