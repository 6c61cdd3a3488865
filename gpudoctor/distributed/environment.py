"""Who am I in this job: rank, world size, local rank and rendezvous address, from the variables
the launcher set. torchrun sets RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT; Kubeflow's
PyTorchJob sets the same (one process per pod, so no LOCAL_RANK); Slurm's srun sets
SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and the node list, from which the first node is the
rendezvous host."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Mapping

DEFAULT_PORT = 29500  # torch.distributed's default MASTER_PORT


class NotDistributed(Exception):
    """No launcher variables: this process is not a rank of a distributed job."""


@dataclass(frozen=True)
class RankEnv:
    """This process's place in the distributed job, from the launcher's variables (``discover``): its rank,
    the world size, its local rank on this host, the rendezvous address, and which launcher set them.
    ``run_id`` keeps one launch's keys in the rendezvous store apart from another's."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm | env
    host: str
    agent_store: bool = False  # torchrun's agent hosts the store; every rank is a client
    run_id: str = "default"

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise NotDistributed(f"{name}={env[name]!r} is not an integer") from None


def first_slurm_host(nodelist: str) -> str:
    """The first host of a Slurm node list: 'gpu[03-05,09],cpu1' -> 'gpu03'. (scontrol show
    hostnames does this too, but it is not on every compute node's PATH.)"""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise NotDistributed(f"cannot read SLURM_JOB_NODELIST={nodelist!r}")
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def discover(env: Mapping[str, str]) -> RankEnv:
    """The rank's place in the job; NotDistributed (with the reason) when the variables are
    missing or inconsistent."""
    host = socket.gethostname()
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local = _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        addr = env.get("MASTER_ADDR")
        port = env.get("MASTER_PORT")
        if not addr or not port:
            raise NotDistributed("RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT are not")
        run_id = env.get("TORCHELASTIC_RUN_ID") or "default"
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        local = _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        launcher = "slurm"
        addr = env.get("MASTER_ADDR") or (first_slurm_host(env["SLURM_JOB_NODELIST"]) if env.get("SLURM_JOB_NODELIST") else None)
        if not addr:
            raise NotDistributed("under Slurm without MASTER_ADDR or SLURM_JOB_NODELIST")
        port = env.get("MASTER_PORT") or str(DEFAULT_PORT)
        run_id = f"slurm-{env.get('SLURM_JOB_ID', '0')}.{env.get('SLURM_STEP_ID', '0')}"
    else:
        raise NotDistributed("no RANK/WORLD_SIZE (torchrun, PyTorchJob) or SLURM_PROCID/SLURM_NTASKS (srun) in the "
                             "environment; launch with torchrun or srun, or use --nproc N on one host")
    try:
        port_number = int(port)
    except ValueError:
        raise NotDistributed(f"MASTER_PORT={port!r} is not a port number") from None
    if not 0 <= rank < world:
        raise NotDistributed(f"rank {rank} is outside the world size {world}")
    if not 0 < port_number < 65536:
        raise NotDistributed(f"MASTER_PORT={port_number} is not a port number")
    return RankEnv(rank, world, local, addr, port_number, launcher, host,
                   agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True", run_id=run_id)
