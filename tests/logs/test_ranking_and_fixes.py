"""Root cause first, consequences after, one finding per rule; fixes name this machine's paths
when a Machine (from the same facts the checks use) is given, and nothing machine-specific when not."""

from __future__ import annotations

from gpudoctor.fix.actions import fix_commands, fix_env
from gpudoctor.logs import Machine, diagnose_lines
from gpudoctor.model import InstallPackage, SetEnv, Symlink
from gpudoctor.paths import GpudoctorDirs

LCUDA = "/usr/bin/ld: cannot find -lcuda: No such file or directory"
CALLED = ("subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpe7nu9b0l/main.c', '-O3', "
          "'-lcuda']' returned non-zero exit status 1.")
GCC = "/usr/include/crt/host_config.h:132:2: error: #error -- unsupported GNU version! gcc versions later than 12 are not supported!"
DIRS = GpudoctorDirs(cache="/home/u/.cache/gpudoctor", config="/home/u/.config/gpudoctor", state="/home/u/.local/state/gpudoctor")


def test_generic_last_line_is_ranked_after_its_cause():
    # The traceback ends with the generic error; the cause is earlier in the log.
    findings = diagnose_lines([LCUDA, "collect2: error: ld returned 1 exit status", "Traceback (most recent call last):", CALLED])
    assert [f.id for f in findings] == ["libcuda-unversioned-missing", "triton-jit-failed"]
    assert findings[1].evidence["consequence"] is True
    assert findings[0].evidence["consequence"] is False


def test_generic_error_alone_is_reported_as_itself():
    [finding] = diagnose_lines([CALLED])
    assert finding.id == "triton-jit-failed" and finding.evidence["consequence"] is False


def test_repeated_lines_make_one_finding_with_a_count():
    findings = diagnose_lines([LCUDA] * 5)
    assert len(findings) == 1 and findings[0].evidence["matches"] == 5


def test_unsloth_all_patched_is_healthy_and_zero_is_not():
    ok = "Unsloth 2026.1.3 patched 36 layers with 36 QKV layers, 36 O layers and 36 MLP layers."
    assert diagnose_lines([ok]) == []
    partial = "Unsloth 2024.7 patched 32 layers with 32 QKV layers, 0 O layers and 32 MLP layers."
    [finding] = diagnose_lines([partial])
    assert finding.id == "unsloth-layers-not-patched" and finding.severity.value == "warning"


def test_trl_and_transformers_kwargs_are_told_apart():
    trl = "TypeError: SFTTrainer.__init__() got an unexpected keyword argument 'tokenizer'"
    hf = "TypeError: TrainingArguments.__init__() got an unexpected keyword argument 'evaluation_strategy'"
    [a] = diagnose_lines([trl])
    [b] = diagnose_lines([hf])
    assert a.id == "trl-sfttrainer-api-change" and "processing_class" in a.message
    assert b.id == "transformers-removed-kwarg" and "eval_strategy" in b.fixes[0].summary


def test_no_machine_means_no_machine_paths():
    # a log from an unknown machine: the fix is to run `gpudoctor check` there, never a path guessed here
    [finding] = diagnose_lines([LCUDA])
    assert [fix.kind for fix in finding.fixes] == ["manual"]
    assert fix_commands(finding.fixes[0]) == ["gpudoctor check"]


def test_libcuda_fix_uses_where_libcuda_really_is():
    facts = Machine(libcuda_dirs=("/usr/lib/x86_64-linux-gnu",), dirs=DIRS)
    [finding] = diagnose_lines([LCUDA], machine=facts)
    user = finding.fixes[0]
    assert user.kind == "user"
    assert Symlink("/home/u/.cache/gpudoctor/lib/libcuda.so", "/usr/lib/x86_64-linux-gnu/libcuda.so.1") in user.actions
    # LIBRARY_PATH only: TRITON_LIBCUDA_PATH at a dir without libcuda.so.1 breaks Triton >= #8668
    assert SetEnv("LIBRARY_PATH", "/home/u/.cache/gpudoctor/lib", prepend=True) in user.actions
    assert not any(getattr(a, "name", "") == "TRITON_LIBCUDA_PATH" for a in user.actions)
    assert finding.fixes[1].kind == "system"
    assert "sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so" in fix_commands(finding.fixes[1])


def test_gcc_fix_picks_the_newest_installed_gcc_within_the_limit():
    facts = Machine(gcc_by_major={14: ("/usr/bin/gcc-14", "/usr/bin/g++-14"), 12: ("/usr/bin/gcc-12", "/usr/bin/g++-12"),
                                       11: ("/usr/bin/gcc-11", None)}, dirs=DIRS)
    [finding] = diagnose_lines([GCC], machine=facts)
    env = fix_env(finding.fixes[0])
    assert env["NVCC_CCBIN"] == "/usr/bin/g++-12" and env["CC"] == "/usr/bin/gcc-12"


def test_gcc_fix_installs_one_when_none_fits():
    facts = Machine(gcc_by_major={15: ("/usr/bin/gcc-15", "/usr/bin/g++-15")}, package_manager="apt", dirs=DIRS)
    [finding] = diagnose_lines([GCC], machine=facts)
    assert finding.fixes[0].kind == "system"
    assert InstallPackage("apt", ("gcc-12", "g++-12")) in finding.fixes[0].actions


def test_this_machine_lookup_never_crashes():
    from gpudoctor.facts import Facts
    from gpudoctor.host import LiveHost
    from gpudoctor.remedies import machine_from_facts

    findings = diagnose_lines([LCUDA, GCC], machine=lambda: machine_from_facts(Facts(LiveHost())))
    assert {f.id for f in findings} == {"libcuda-unversioned-missing", "nvcc-host-compiler-unsupported"}


def test_findings_serialise_to_the_json_contract():
    import json

    from gpudoctor.report import render_json

    data = json.loads(render_json(diagnose_lines([LCUDA, CALLED]), []))
    assert data["schema"] == 1
    assert [f["id"] for f in data["findings"]] == ["libcuda-unversioned-missing", "triton-jit-failed"]
    assert {"kind", "summary", "commands", "env"} <= set(data["findings"][0]["fixes"][0])


def test_incremental_diagnoser_for_a_running_child():
    from gpudoctor.logs import LogDiagnoser

    diagnoser = LogDiagnoser("train.py")
    for piece in (b"step 1 loss 2.3\n/usr/bin/ld: cannot find", b" -lcuda: No such file or directory\n", b"partial"):
        diagnoser.feed(piece)  # a line split across reads is still recognised
    [finding] = diagnoser.findings()
    assert finding.id == "libcuda-unversioned-missing" and finding.evidence["log"] == "train.py"


NCCL_IN = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
           "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5")
NCCL_CLASS = "ncclUnhandledCudaError: Call to CUDA function failed."


def test_nccl_error_class_alone_makes_the_finding_and_names_the_error():
    # torch prints the class line (and NCCL's last error) after `NCCL error in:`; a paste may hold only those
    [finding] = diagnose_lines(["[rank0]: " + NCCL_CLASS, "[rank0]: Last error:", "[rank0]: Cuda failure 999 'unknown error'"])
    assert finding.id == "nccl-failure"
    assert finding.message == ("A NCCL collective failed (unhandled cuda error, ncclUnhandledCudaError); "
                               "the CUDA call inside NCCL failed (999 'unknown error').")


def test_nccl_error_line_and_class_line_make_one_finding_saying_it_once():
    [finding] = diagnose_lines(["[rank7]: " + NCCL_IN, "[rank7]: " + NCCL_CLASS])
    assert finding.id == "nccl-failure"
    assert finding.evidence["signatures"] == ["nccl-error-in", "nccl-error-class"]
    assert finding.message == "A NCCL collective failed (unhandled cuda error, ncclUnhandledCudaError) in NCCL 2.20.5."


def test_a_cuda_failure_nccl_ignored_is_not_a_finding_or_a_value():
    # NCCL_DEBUG=INFO lines of CUDA calls NCCL ignores (CUDACHECKIGNORE) in a healthy run
    info = "host:123:456 [0] NCCL INFO misc/utils.cc:33 Cuda failure 'operation not supported'"
    assert diagnose_lines([info]) == []
    [finding] = diagnose_lines([info, NCCL_IN])
    assert "CUDA call" not in finding.message


def test_transformers_trainer_kwargs_and_trl_ones_are_told_apart():
    removed = "TypeError: Trainer.__init__() got an unexpected keyword argument 'tokenizer'"
    too_old = "TypeError: Seq2SeqTrainer.__init__() got an unexpected keyword argument 'processing_class'"
    trl = "TypeError: SFTTrainer.__init__() got an unexpected keyword argument 'processing_class'"
    [a] = diagnose_lines([removed])
    [b] = diagnose_lines([too_old])
    [c] = diagnose_lines([trl])
    assert a.id == b.id == "transformers-removed-kwarg" and c.id == "trl-sfttrainer-api-change"
    assert "renamed to processing_class" in a.message and a.message.startswith("Trainer does not accept")
    assert "transformers 4.46" in b.message and b.message.startswith("Seq2SeqTrainer")
