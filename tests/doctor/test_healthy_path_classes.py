"""A healthy machine's preflight() creates no dataclass it can do without: each frozen dataclass
costs 0.7-1.2 ms at a training script's start on Python 3.12 (issue 12's Keep; 38 of them were 46
ms on the H200, bench/preflight_floor.py). The host's answers and the probes' facts are NamedTuples
(~0.2 ms each); the model's Fix, Finding and CheckResult stay dataclasses; the classes used only
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
assert entry["checks"] > 30, entry["checks"]  # the checks ran
print(" ".join(created))
"""


def _created(code: str, *args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_a_healthy_machine_creates_only_the_models_dataclasses():
    # HostError: the snapshot host's own (a live host never creates it, below)
    assert _created(CHECKED, H200) == {"Fix", "Finding", "CheckResult", "HostError"}


def test_the_live_host_does_not_create_host_error():
    created = _created(CREATED + "import gpudoctor.host.live; print(' '.join(created))")
    assert "HostError" not in created


def test_the_lazy_names_are_still_there():
    from gpudoctor import host, knowledge
    from gpudoctor.host import base, errors
    from gpudoctor.rule import Rule

    assert knowledge.Rule is Rule and base.HostError is errors.HostError is host.HostError
    assert isinstance(knowledge.catalogue_rule("no-nvidia-driver"), Rule)
