"""A healthy machine's preflight() creates no class it does not use: each frozen dataclass costs
~0.5-1 ms at a training script's start on Python 3.12 (issue 12's Keep). The classes used only
for a finding (the catalogue's Rule), an Xid line (probes/xid.py) or an unusable snapshot
(HostError) are created on first use."""

from __future__ import annotations

import os
import subprocess
import sys

from rule_cases import FIXTURES

H200 = os.path.join(FIXTURES, "snapshots", "h200-baseline")

# Every dataclass created, by the dataclasses module's own hook point (_process_class), so the
# test does not depend on where a class lives.
CREATED = """
import dataclasses
created = []
_process = dataclasses._process_class
def _spy(cls, *args, **kwargs):
    created.append(cls.__qualname__)
    return _process(cls, *args, **kwargs)
dataclasses._process_class = _spy
"""
CHECKED = CREATED + """
import sys
from gpudoctor import hook
from gpudoctor.host.snapshot import SnapshotHost
entry = hook._checked(SnapshotHost(sys.argv[1]), {"require": [], "skip": [], "strict": False}, None)
assert entry["findings"] == [], entry["findings"]
print(" ".join(created))
"""


def _created(code: str, *args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_a_healthy_machine_creates_no_rule_no_xid_type_and_no_fix_action():
    created = _created(CHECKED, H200)
    assert {"Check", "CheckResult", "NvmlInfo", "DriverFacts"} <= created  # the checks ran
    assert not created & {"Rule", "XidEvent", "SetEnv", "MakeDir", "SuggestCommand"}, created


def test_the_live_host_does_not_create_host_error():
    created = _created(CREATED + "import gpudoctor.host.live; print(' '.join(created))")
    assert "CommandResult" in created and "HostError" not in created


def test_the_lazy_names_are_still_there():
    from gpudoctor import host, knowledge
    from gpudoctor.host import base, errors
    from gpudoctor.rule import Rule

    assert knowledge.Rule is Rule and base.HostError is errors.HostError is host.HostError
    assert isinstance(knowledge.catalogue_rule("no-nvidia-driver"), Rule)
