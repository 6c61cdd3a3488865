"""Remedies for the failures that only a log shows (issue 15): collective timeouts and
training-code mistakes around mixed precision and gradient checkpointing."""

from __future__ import annotations

from typing import Any, Mapping

from ..model import CodeEdit, Fix, SuggestCommand


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
    return [Fix("manual", "Upgrade bitsandbytes: releases after 0.45.2 no longer import triton.ops, which Triton 3.2 removed.",
                (SuggestCommand("pip install -U 'bitsandbytes>=0.45.3'"),))]


def windows_dll_load_failed(v: Mapping[str, Any]) -> list[Fix]:
    dll = v.get("dll_name") or "a torch DLL"
    return [Fix("manual", f"Install the Microsoft Visual C++ Redistributable (x64) that {dll} needs, restart the shell, "
                          "and import torch again; with torch 2.4.0 (fbgemm.dll needs libomp140) upgrading torch also "
                          "fixes it.",
                (SuggestCommand("winget install Microsoft.VCRedist.2015+.x64"),
                 SuggestCommand("pip install -U torch --index-url https://download.pytorch.org/whl/cu121")))]


def cuda_library_shadowed(v: Mapping[str, Any]) -> list[Fix]:
    shadow = v.get("shadow_path")
    where = f" ({shadow} was loaded)" if shadow else ""
    return [Fix("manual", f"Load the CUDA libraries that torch's wheel ships{where}: take the system CUDA toolkit's lib64 "
                          "out of LD_LIBRARY_PATH for this environment and make the nvidia-* wheels agree.",
                (SuggestCommand("env -u LD_LIBRARY_PATH python -c 'import torch; print(torch.cuda.is_available())'"),
                 SuggestCommand("pip install -U nvidia-nvjitlink-cu12")))]


def python_headers_missing(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Install the development headers of the Python that runs the job (they must match its version), "
                          "then clear Triton's cache so the launcher is rebuilt.",
                (SuggestCommand("sudo apt install python3-dev  # or python3.X-dev / python3-devel"),
                 SuggestCommand("python -c \"import sysconfig; print(sysconfig.get_paths()['include'])\"")))]


def host_compiler_too_old(v: Mapping[str, Any]) -> list[Fix]:
    need = v.get("min_version")
    what = f"{v.get('compiler', 'GCC')} {need} or later" if need else "a newer GCC"
    return [Fix("manual", f"Build with {what}: load or install a newer compiler, point CC/CXX (and CUDAHOSTCXX) at it, "
                          "and rebuild the extension.",
                (SuggestCommand("conda install -c conda-forge gxx_linux-64=12  # or: module load gcc/12"),
                 SuggestCommand("CC=$(which gcc) CXX=$(which g++) pip install --no-build-isolation <package>")))]


def xformers_abi_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Install the xFormers build for the installed torch and CUDA (or install both in one pip "
                          "command so they resolve together), then check that its kernels load.",
                (SuggestCommand("pip install -U xformers --index-url https://download.pytorch.org/whl/cu121"),
                 SuggestCommand("python -m xformers.info")))]


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
    return [Fix("manual", f"Install versions of {package} and the packages that import it made for each other: upgrade them "
                          "together so pip resolves a consistent set (or pin the set your project was tested with).",
                (SuggestCommand("pip install -U transformers peft accelerate trl"),))]
