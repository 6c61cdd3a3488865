"""Findings whose rule was right but whose message or fix misled, from the held-out round 2 of
real logs (docs/diagnosis.md): what each must and must not say now."""

from __future__ import annotations

from gpudoctor.fix.actions import fix_commands
from gpudoctor.logs import diagnose_lines
from gpudoctor.remedies import fixes_for


def xformers_warning(built: str, cuda: str, have: str) -> list[str]:
    # xformers/_cpp_lib.py (0.0.16+), as SEINE#21 and xformers#982 show it
    return ["WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:",
            f"    PyTorch {built} with CUDA {cuda} (you have {have})",
            "    Python  3.11.7 (you have 3.11.7)",
            "  Please reinstall xformers (see https://github.com/facebookresearch/xformers#installing-xformers)"]


def commands(finding) -> list[str]:
    return [c for fix in finding.fixes for c in fix_commands(fix)]


def test_xformers_on_a_cpu_only_torch_names_the_torch_first():
    first, second = diagnose_lines(xformers_warning("2.2.0+cu121", "1201", "2.2.0+cpu"))
    assert (first.id, second.id) == ("torch-cpu-only", "xformers-abi-mismatch")
    assert "2.2.0+cpu" in first.message and "CPU-only" in first.message
    assert second.evidence["consequence"] is True
    assert "CPU-only build" in second.message
    # xformers' own fix installs a CUDA torch with it, not an xformers for the CPU torch
    assert any("install --force-reinstall torch xformers --index-url https://download.pytorch.org/whl/cu" in c
               for c in commands(second)), commands(second)
    assert not any("torch==2.2.0+cpu" in c for c in commands(second))


def test_xformers_built_for_the_installed_torch_does_not_blame_the_versions():
    [finding] = diagnose_lines(xformers_warning("2.0.1", "1106", "2.0.1"))
    assert finding.id == "xformers-abi-mismatch"
    assert "running PyTorch 2.0.1" not in finding.message  # was: "built for PyTorch 2.0.1, running PyTorch 2.0.1"
    assert "versions are not the cause" in finding.message
    assert commands(finding) == ["XFORMERS_MORE_DETAILS=1 python -m xformers.info"]


def test_xformers_built_for_another_torch_keeps_its_fix_for_the_installed_torch():
    [finding] = diagnose_lines(xformers_warning("2.4.0+cu121", "1201", "2.3.1+cu121"))
    assert "built for PyTorch 2.4.0+cu121, running PyTorch 2.3.1+cu121" in finding.message
    assert "python -m pip install -U xformers 'torch==2.3.1+cu121'" in commands(finding)


def test_the_static_check_values_take_the_same_branches():
    # one owner: the static check passes the installed torch as "torch"
    cpu = fixes_for("xformers-abi-mismatch", {"torch": "2.5.1+cpu"})
    assert "torch xformers --index-url" in fix_commands(cpu[0])[0]
    other = fixes_for("xformers-abi-mismatch", {"torch": "2.5.1"})
    assert fix_commands(other[0])[0] == "python -m pip install -U xformers 'torch==2.5.1'"
