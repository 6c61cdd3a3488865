"""Remedies for the rules of issue 15: collective timeouts, training-code mistakes around mixed
precision and gradient checkpointing, and the package, library and build problems that the
static checks (gpudoctor/checks/compat.py, builds.py, libraries.py) also find before training."""

from __future__ import annotations

from typing import Any, Mapping

from ..model import CodeEdit, Fix, RemoveFromPathVar, SetEnv, SuggestCommand
from .installer import pip, python
from .packages import TORCH_CUDA_INDEX


def nccl_timeout(v: Mapping[str, Any]) -> list[Fix]:
    return [
        Fix("manual", "Open the log of the rank that did not report the timeout (or whose SeqNum is lowest): its last "
                      "lines show why it stopped (a crash, a rank-0-only evaluation or checkpoint save, slow data). "
                      "Rerun with NCCL_DEBUG=INFO and the flight recorder on to record the stuck collective.",
            (SuggestCommand("NCCL_DEBUG=INFO TORCH_NCCL_TRACE_BUFFER_SIZE=2000 <your launch command>"),)),
        Fix("code", "Only if the slow step is expected: raise the collective timeout (default "
                    f"{v.get('timeout_ms', '600000')} ms here).",
            (CodeEdit("longer NCCL timeout", "init_process_group(backend=\"nccl\")",
                      "init_process_group(backend=\"nccl\", timeout=datetime.timedelta(hours=2))"),)),
    ]


def fp16_params_with_grad_scaler(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", "Keep the trainable weights in fp32 under fp16 mixed precision: load the model without "
                        "torch_dtype=torch.float16 (or cast the trainable parameters to float32), or train with bf16 "
                        "on a GPU that supports it.",
                (CodeEdit("fp32 trainable weights", "torch_dtype=torch.float16", "torch_dtype=torch.float32"),))]


def gradient_checkpointing_no_input_grads(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", "Make the checkpointed blocks record a graph: call model.enable_input_require_grads() before "
                        "training, or use non-reentrant checkpointing.",
                (CodeEdit("non-reentrant checkpointing", "model.gradient_checkpointing_enable()",
                          "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})"),))]


def bitsandbytes_triton_incompatible(v: Mapping[str, Any]) -> list[Fix]:
    # The first fixed release comes from the check's row in rules/compat.toml (one owner); a log
    # from an unknown machine falls back to that table's answer: bitsandbytes PR #1413, in 0.45.1.
    fixed_by = v.get("fixed_by") or _compat_fixed_by("bitsandbytes_triton") or "bitsandbytes>=0.45.1"
    return [Fix("manual", f"Upgrade bitsandbytes ({fixed_by}): those releases no longer import triton.ops, which "
                          "Triton 3.2 removed.", (pip(v, f"install -U '{fixed_by}'"),))]


def _compat_fixed_by(table: str) -> str | None:
    try:
        from ..knowledge import load_rules_toml

        rows = load_rules_toml("compat.toml").get(table) or []
        return next((row.get("fixed_by") for row in rows if row.get("fixed_by")), None)
    except Exception:  # noqa: BLE001 - the remedy still answers without the table
        return None


def windows_dll_load_failed(v: Mapping[str, Any]) -> list[Fix]:
    dll = v.get("dll_name") or "a torch DLL"
    return [Fix("manual", f"Install the Microsoft Visual C++ Redistributable (x64) that {dll} needs, restart the shell, "
                          "and import torch again; with torch 2.4.0 (fbgemm.dll needs libomp140) upgrading torch also "
                          "fixes it.",
                (SuggestCommand("winget install Microsoft.VCRedist.2015+.x64"),
                 # only a Windows log shows this: never the interpreter of the (Linux) machine that reads it
                 pip({}, "install -U torch --index-url https://download.pytorch.org/whl/cu121")))]


def cuda_library_shadowed(v: Mapping[str, Any]) -> list[Fix]:
    directories = tuple(v.get("shadow_dirs") or ())
    if directories:  # the static check saw which LD_LIBRARY_PATH entries hold the older copies
        return [Fix("user", f"Remove {', '.join(directories)} from LD_LIBRARY_PATH, so the libraries torch's wheels ship "
                            "are loaded.", tuple(RemoveFromPathVar("LD_LIBRARY_PATH", d) for d in directories))]
    shadow = v.get("shadow_path")
    where = f" ({shadow} was loaded)" if shadow else ""
    return [Fix("manual", f"Load the CUDA libraries that torch's wheel ships{where}: take the system CUDA toolkit's lib64 "
                          "out of LD_LIBRARY_PATH for this environment and make the nvidia-* wheels agree.",
                (python(v, "-c 'import torch; print(torch.cuda.is_available())'", prefix="env -u LD_LIBRARY_PATH "),
                 pip(v, "install -U nvidia-nvjitlink-cu12")))]


_DEV_PACKAGE = {"apt": "python{v}-dev", "dnf": "python{v}-devel", "yum": "python{v}-devel", "zypper": "python{n}-devel"}


def python_headers_missing(v: Mapping[str, Any]) -> list[Fix]:
    version, manager, base = v.get("python_version"), v.get("package_manager"), v.get("base_prefix")
    rebuild = python(v, "-c \"import sysconfig; print(sysconfig.get_paths()['include'])\"")
    if version and base in ("/usr", "/usr/local") and manager in _DEV_PACKAGE:
        # the distribution's own Python: its -dev package puts Python.h where sysconfig says
        package = _DEV_PACKAGE[manager].format(v=version, n=version.replace(".", ""))
        return [Fix("manual", f"Install the headers of Python {version} ({package}), then run the job again (Triton "
                              "rebuilds its launcher on the next kernel).", (SuggestCommand(f"sudo {manager} install {package}"),
                                                                              rebuild))]
    if version and base:
        return [Fix("manual", f"The Python in {base} ships no headers: use a build of Python {version} that has them "
                              "(python.org, conda, uv's managed CPython, or the distribution's python3-dev), then "
                              "recreate the environment on it.", (rebuild,))]
    return [Fix("manual", "Install the development headers of the Python that runs the job (they must match its version), "
                          "then clear Triton's cache so the launcher is rebuilt.",
                (SuggestCommand("sudo apt install python3-dev  # or python3.X-dev / python3-devel"), rebuild))]


def host_compiler_too_old(v: Mapping[str, Any]) -> list[Fix]:
    need = v.get("min_version")
    need = int(need) if str(need).isdigit() else None
    what = f"{v.get('compiler', 'GCC')} {need} or later" if need else "a newer GCC"
    fixes = []
    # an installed gcc that is new enough, the oldest such (nvcc accepts only gcc up to its own limit)
    usable = sorted(m for m, (_, gxx) in (v.get("gcc_by_major") or {}).items() if need and m >= need and gxx)
    if usable and v.get("compiler", "GCC") == "GCC":
        cc, cxx = v["gcc_by_major"][usable[0]]
        fixes.append(Fix("user", f"Build with the installed {cc} (gcc {usable[0]}): export CC and CXX.",
                         (SetEnv("CC", cc), SetEnv("CXX", cxx))))
    fixes.append(Fix("manual", f"Build with {what}: load or install a newer compiler, point CC/CXX (and CUDAHOSTCXX) at "
                               "it, and rebuild the extension.",
                     (SuggestCommand("conda install -c conda-forge gxx_linux-64=12  # or: module load gcc/12"),
                      pip(v, "install --no-build-isolation <package>", prefix="CC=$(which gcc) CXX=$(which g++) "))))
    return fixes


def xformers_abi_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    # "torch": the installed version (static check); "torch_version": xFormers' "(you have X)" (a log)
    torch = v.get("torch") or v.get("torch_version")
    if torch and torch.endswith("+cpu"):
        # No xFormers build loads on a CPU-only torch: the fix is torch's (torch-cpu-only), with
        # xformers in the same command so the two resolve together (held-out round 2, xformers#982).
        return [Fix("manual", f"The installed torch ({torch}) is a CPU-only build: install torch from a CUDA index "
                              "(pick the CUDA your driver supports) with xformers in the same pip command, then check "
                              "that its kernels load.",
                    (pip(v, f"install --force-reinstall torch xformers --index-url {TORCH_CUDA_INDEX}"),
                     python(v, "-m xformers.info")))]
    if torch and torch == v.get("xformers_torch"):
        # Built for this very torch, yet it did not load (SEINE#21, a Mac): reinstalling xformers
        # for this torch would change nothing; its loader's own error says what is missing.
        return [Fix("manual", f"xFormers was built for this torch ({torch}), so a matching reinstall will not help: "
                              "read the loader's error (XFORMERS_MORE_DETAILS=1) for what is missing, e.g. CUDA in "
                              "torch (no CUDA on macOS), a CUDA library, or the Python it was built for.",
                    (python(v, "-m xformers.info", prefix="XFORMERS_MORE_DETAILS=1 "),))]
    for_torch = f"torch {torch}" if torch else "the installed torch and CUDA"
    return [Fix("manual", f"Install the xFormers build made for {for_torch} (or install torch and xformers in one pip "
                          "command so they resolve together), then check that its kernels load.",
                (pip(v, f"install -U xformers 'torch=={torch}'" if torch else
                     f"install -U xformers --index-url {TORCH_CUDA_INDEX}"),
                 python(v, "-m xformers.info")))]


def token_id_out_of_range(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", "Resize the model's embeddings after adding tokens to the tokenizer, and keep sequences within "
                        "max_position_embeddings; rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing line.",
                (CodeEdit("resize embeddings after adding tokens", "tokenizer.add_special_tokens(...)",
                          "tokenizer.add_special_tokens(...)\nmodel.resize_token_embeddings(len(tokenizer))"),))]


def weights_offloaded_to_cpu(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", "Load every layer onto the GPU instead of letting device_map=\"auto\" offload to the CPU (make "
                        "the model fit: 4-bit loading or a smaller model), or turn off the Triton kernels when offloading.",
                (CodeEdit("no CPU offload", "device_map=\"auto\"", "device_map={\"\": 0}"),))]


def peft_transformers_incompatible(v: Mapping[str, Any]) -> list[Fix]:
    package = v.get("package") or "transformers"
    fixed_by = v.get("fixed_by")
    if fixed_by:  # a known pair (rules/compat.toml): the release that works
        first = fixed_by.split(",")[0].strip()
        return [Fix("manual", f"Install {fixed_by}: that release and the installed one work together.",
                    (pip(v, f"install '{first}'"),))]
    return [Fix("manual", f"Install versions of {package} and the packages that import it made for each other: upgrade them "
                          "together so pip resolves a consistent set (or pin the set your project was tested with).",
                (pip(v, "install -U transformers peft accelerate trl"),))]
