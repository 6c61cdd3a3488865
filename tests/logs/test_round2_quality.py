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


# xformers' warning on Windows, as bitsandbytes#772 shows it
WINDOWS_TRITON = [
    r"C:\Users\User\MLOPs\data\dependencies\python\numpy\core\getlimits.py:89: UserWarning: The value of the smallest subnormal",
    "A matching Triton is not available, some optimizations will not be enabled.",
    "Error caught was: No module named 'triton'"]


def test_triton_missing_on_windows_names_triton_windows():
    [finding] = diagnose_lines(WINDOWS_TRITON)
    assert finding.id == "triton-missing" and finding.severity.value == "warning"
    assert commands(finding) == ['python -m pip install -U "triton-windows"']
    assert finding.evidence["line_number"] == 3  # the value-only path line is not the evidence


def test_triton_missing_elsewhere_keeps_pip_install_triton():
    [finding] = diagnose_lines(WINDOWS_TRITON[1:])
    assert commands(finding) == ['python -m pip install "triton"']
    # a Windows path alone is never a finding
    assert diagnose_lines(WINDOWS_TRITON[:1]) == []


def test_a_windows_interpreter_gets_the_windows_package_from_the_static_check_too():
    fixes = fixes_for("triton-missing", {"expected": "triton==3.2.0", "python": r"C:\venv\Scripts\python.exe"})
    [command] = fix_commands(fixes[0])
    assert command.endswith(' -m pip install "triton-windows==3.2.*"'), command
    linux = fixes_for("triton-missing", {"expected": "triton==3.2.0", "python": "/opt/venv/bin/python"})
    assert fix_commands(linux[0]) == ['/opt/venv/bin/python -m pip install "triton==3.2.0"']


def test_an_unknown_trl_argument_is_not_called_renamed():
    # trl#3564: `tools` copied from a TRL pull request into SFTConfig under trl 0.18.1
    [finding] = diagnose_lines(["TypeError: SFTConfig.__init__() got an unexpected keyword argument 'tools'"])
    assert finding.id == "trl-sfttrainer-api-change"
    assert "no longer accepts" not in finding.message and "new name" not in finding.message
    assert "does not accept `tools`" in finding.message and "newer than this TRL release" in finding.message
    assert commands(finding) == ["python -m pip show trl"]


def test_a_field_of_the_users_training_arguments_is_named_as_such():
    # Chinese-Mixtral-8x7B#31: SFTTrainer (trl 0.9.6-0.14) rebuilt the user's TrainingArguments as SFTConfig
    lines = ['  File "/root/miniconda3/lib/python3.10/site-packages/trl/trainer/sft_trainer.py", line 152, in __init__',
             "    args = SFTConfig(**args_as_dict)",
             "TypeError: SFTConfig.__init__() got an unexpected keyword argument 'cache_dir'"]
    [finding] = diagnose_lines(lines)
    assert "a field your own TrainingArguments class adds" in finding.message
    assert finding.evidence["line_number"] == 3
    assert "pass an SFTConfig" in finding.fixes[0].summary and commands(finding) == []


def test_a_known_trl_move_still_says_where_it_went():
    [finding] = diagnose_lines(["TypeError: SFTTrainer.__init__() got an unexpected keyword argument 'dataset_text_field'"])
    assert finding.message.endswith("it moved to SFTConfig(dataset_text_field=...).")
    assert "SFTConfig(dataset_text_field=...)" in finding.fixes[0].summary
