"""Reports travel to rank 0 through the job's c10d rendezvous store (TCPStore), with a deadline.

Why the store and not a collective: the store is plain TCP (no NCCL, so it works when NCCL is
what is broken) and it answers per key, so rank 0 knows exactly which ranks reported by the
deadline. A collective (gloo's gather included) blocks every rank until its timeout when one
rank never arrives, and then cannot say which one it was. The store is the one gloo and NCCL
themselves rendezvous through, at MASTER_ADDR:MASTER_PORT: under torchrun its agent hosts it
(TORCHELASTIC_USE_AGENT_STORE=True) and every rank is a client, otherwise rank 0 hosts it, as
torch.distributed.rendezvous's env:// handler does.

Imports torch: only the distributed path loads this module.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from .environment import RankEnv

POLL_S = 0.05


class StoreUnreachable(Exception):
    """This rank could not reach (or host) the rendezvous store."""


class Rendezvous:
    def __init__(self, env: RankEnv, connect_timeout_s: float) -> None:
        from torch.distributed import PrefixStore, TCPStore

        self.env = env
        hosts_server = env.is_leader and not env.agent_store
        try:
            base = TCPStore(env.master_addr, env.master_port, None, hosts_server,
                            timedelta(seconds=connect_timeout_s), wait_for_workers=False, multi_tenant=True)
        except Exception as exc:  # noqa: BLE001 - DistStoreError, RuntimeError (address in use, refused)
            where = f"{env.master_addr}:{env.master_port}"
            role = "host" if hosts_server else "reach"
            raise StoreUnreachable(f"could not {role} the rendezvous store at {where} within "
                                   f"{connect_timeout_s:g} s: {str(exc).splitlines()[0][:300]}") from None
        self.prefix = f"gpudoctor/{env.run_id}/"
        self.store = PrefixStore(self.prefix, base)
        self._base = base

    # -- every rank ------------------------------------------------------------------------
    def publish(self, phase: str, payload: dict) -> None:
        self.store.set(f"{phase}/{self.env.rank}", json.dumps(payload, default=str))
        self.store.add(f"{phase}/count", 1)

    def wait_for(self, key: str, timeout_s: float) -> dict | None:
        """The JSON value of ``key`` once set, or None after ``timeout_s`` (or when the store
        went away: rank 0 hosts it outside torchrun, and it may be gone)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self.store.check([key]):
                    return json.loads(self.store.get(key))
            except Exception:  # noqa: BLE001 - the server is gone
                return None
            time.sleep(POLL_S)
        return None

    def announce(self, key: str, payload: dict) -> None:
        self.store.set(key, json.dumps(payload, default=str))

    # -- rank 0 ----------------------------------------------------------------------------
    def collect(self, phase: str, ranks: list[int], timeout_s: float) -> tuple[dict[int, dict], list[int]]:
        """Each listed rank's payload of ``phase``, waiting at most ``timeout_s`` for them all;
        returns (payloads, the ranks that did not report)."""
        deadline = time.monotonic() + timeout_s
        wanted = len(ranks)
        while time.monotonic() < deadline:
            if self.store.add(f"{phase}/count", 0) >= wanted:
                break
            time.sleep(POLL_S)
        payloads: dict[int, dict] = {}
        missing: list[int] = []
        for rank in ranks:
            key = f"{phase}/{rank}"
            if self.store.check([key]):
                payloads[rank] = json.loads(self.store.get(key))
            else:
                missing.append(rank)
        return payloads, missing
