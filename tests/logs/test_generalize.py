"""Reader robustness: wrapped and indented messages, causes quoted inside a repr or a JSON log
line, and CUDA error numbers and enum names decoded into rules."""

from __future__ import annotations

import json
import re
import time

import pytest

from gpudoctor.logs import diagnose_lines
from gpudoctor.logs.cuda_errors import decode, load_cuda_errors

# torch.utils.cpp_extension's message (torch/utils/cpp_extension.py, _check_cuda_version)
MISMATCH = ("The detected CUDA version (12.1) mismatches the version that was used to compile",
            "PyTorch (11.8). Please make sure to use the same CUDA versions.")


def ids(lines):
    return [f.id for f in diagnose_lines(lines)]


def test_a_message_wrapped_and_indented_by_pip_is_joined():
    lines = ["      Traceback (most recent call last):",
             "        File \"setup.py\", line 12, in <module>",
             "      RuntimeError:",
             "      " + MISMATCH[0],
             "      " + MISMATCH[1],
             "      [end of output]"]
    [finding] = diagnose_lines(lines)
    assert finding.id == "cuda-version-mismatch"
    assert "(11.8)" in finding.message


def test_a_message_broken_mid_phrase_by_a_build_tool_is_joined():
    # CMake indents each line of a child's output by two spaces and wraps at its width.
    lines = ["  nvcc fatal   : Unsupported gpu architecture",
             "  #error -- unsupported GNU version! gcc versions later than 12 are not",
             "  supported!"]
    assert "nvcc-host-compiler-unsupported" in ids(lines)


def test_docker_buildkit_prefixes_are_stripped_when_joining():
    lines = ["#12 41.20 " + MISMATCH[0], "#12 41.20 " + MISMATCH[1]]
    [finding] = diagnose_lines(lines)
    assert "(11.8)" in finding.message


def test_journald_and_torchrun_prefixes_are_stripped_when_joining():
    # xFormers' warning spans two lines; a log collector or torchrun prefixes each of them
    head = "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:"
    tail = "    PyTorch 2.10.0+cu128 with CUDA 1208 (you have 2.11.0+cu130)"
    journald = "Aug 12 10:38:34 fileserver unsloth[4073658]: "
    for prefix in (journald, "[rank3]:"):
        [finding] = diagnose_lines([prefix + head, prefix + tail])
        assert finding.id == "xformers-abi-mismatch" and "2.10.0+cu128" in finding.message


def test_a_cause_inside_a_runtime_error_repr_is_found():
    line = ("Worker failed: RuntimeError('CUDA error: no kernel image is available for execution on the "
            "device\\nCUDA kernel errors might be asynchronously reported at some other API call')")
    assert ids([line]) == ["torch-arch-unsupported"]


def test_a_cause_inside_a_json_log_line_is_found():
    message = "Traceback (most recent call last):\n  ...\nRuntimeError:\n" + "\n".join(MISMATCH)
    line = json.dumps({"level": "error", "message": message})
    [finding] = diagnose_lines([line])
    assert finding.id == "cuda-version-mismatch"
    assert "(11.8)" in finding.message


def test_unrelated_neighbouring_lines_do_not_make_a_finding():
    lines = ["  step 10 loss 2.31", "  CUDA available: True", "  compile time 3.1s", "  support: ok"]
    assert ids(lines) == []


@pytest.mark.parametrize("line, rule", [
    ("RuntimeError: CUDA error: 35", "driver-too-old"),
    ("cudaGetDeviceCount returned error code 35", "driver-too-old"),
    ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
     "attempted on non supported HW", "cuda-compat-lib-mismatch"),
    ("Error 803: system has unsupported display driver / cuda driver combination (Triggered internally at "
     "../c10/cuda/CUDAFunctions.cpp:108.)", "driver-library-mismatch"),
    ("cuInit() error: CUresult 34", "libcuda-stub-at-runtime"),
    ("failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", "no-gpu-visible"),
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoKernelImageForDevice", "torch-arch-unsupported"),
    ("CUDA error code 222 while loading module", "driver-too-old"),
])
def test_cuda_error_numbers_and_names_decode_to_rules(line, rule):
    findings = diagnose_lines([line])
    assert findings and findings[0].id == rule, [f.id for f in findings]


@pytest.mark.parametrize("line", [
    "make: *** [Makefile:12: all] Error 2",
    "make[2]: *** [CMakeFiles/ext.dir/cuda_kernel.cu.o] Error 1",
    "CUDA extension build: process exited with exit code 100",
    "step 35 | loss 1.02 | cuda mem 209 MiB",
    "RuntimeError: CUDA error: 999",
])
def test_numbers_that_are_not_cuda_errors_stay_quiet(line):
    assert ids([line]) == []


def test_table_values_agree_with_the_headers():
    # Values from NVIDIA's driver_types.h (cudaError_t) and cuda.h (CUresult).
    by_code = {e.code: e for e in load_cuda_errors()}
    assert by_code[34].runtime == "cudaErrorStubLibrary" and by_code[34].driver == "CUDA_ERROR_STUB_LIBRARY"
    assert by_code[35].runtime == "cudaErrorInsufficientDriver"
    assert by_code[100].driver == "CUDA_ERROR_NO_DEVICE"
    assert by_code[209].driver == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert by_code[222].runtime == "cudaErrorUnsupportedPtxVersion"
    assert by_code[803].driver == "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
    assert by_code[804].runtime == "cudaErrorCompatNotSupportedOnDevice"


def test_every_table_rule_is_in_the_catalogue():
    from gpudoctor.knowledge import load_catalogue

    assert sorted({e.rule for e in load_cuda_errors()} - set(load_catalogue())) == []


def test_the_decoder_is_bounded_on_hostile_lines():
    fillers = ["CUDA " * 2000, "cudaError" * 800, "error code " * 900, "error CUresult" * 600, "9" * 8000]
    start = time.perf_counter()
    for filler in fillers:
        decode(filler)
        diagnose_lines([filler, filler + " error 35", "  " + filler])
    assert time.perf_counter() - start < 1.0


def test_nccl_timeout_names_the_rank_that_fell_behind():
    from pathlib import Path

    from gpudoctor.logs import diagnose_paths

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "nccl-timeout"
    behind = diagnose_paths([str(fixtures / "pytorch-118369.log")])[0]
    assert "Rank 7 reports the lowest SeqNum (64088; others reached 96125)" in behind.message
    same = diagnose_paths([str(fixtures / "basicsr-737.log")])[0]  # every rank at SeqNum 808
    assert "lowest SeqNum" not in same.message and "rank 1" in same.message


# The tools' own wordings (the file each comes from is recorded beside the signature).
@pytest.mark.parametrize("text, rule", [
    ("error: command 'gcc' failed: No such file or directory", "c-compiler-missing"),
    ("unable to execute 'x86_64-linux-gnu-gcc': No such file or directory\n"
     "error: command 'x86_64-linux-gnu-gcc' failed with exit status 1", "c-compiler-missing"),
    ("CMake Error at CMakeLists.txt:3 (project):\n  No CMAKE_CXX_COMPILER could be found.", "c-compiler-missing"),
    ("InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, 'g++')",
     "c-compiler-missing"),
    ("CMake Error at CMakeLists.txt:2 (project):\n  No CMAKE_CUDA_COMPILER could be found.", "cuda-home-missing"),
    ("MissingCUDAException: CUDA_HOME does not exist, unable to compile CUDA op(s)", "cuda-home-missing"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'", "cuda-home-missing"),
    ("ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.", "bf16-unsupported"),
    ("ld.lld: error: unable to find library -lcuda", "libcuda-unversioned-missing"),
    ("host_config.h:151:2: error: #error -- unsupported clang version! clang version must be less than 16 and "
     "greater than 3.2", "nvcc-host-compiler-unsupported"),
    ("host_config.h(153): fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version! Only the "
     "versions between 2017 and 2022 (inclusive) are supported!", "nvcc-host-compiler-unsupported"),
    ("RuntimeError: unable to write to file </torch_18692_1954506624>: No space left on device (28)", "shm-too-small"),
    ("RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
     "cuda-oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cuda-oom"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.", "no-nvidia-driver"),
    # issue 15, second pass: each line is the library's format string filled in as it prints it
    # FlashAttention 1 (a TORCH_CHECK without a message, as torch prints it), 2 and 3
    ("RuntimeError: Expected is_sm8x || is_sm75 to be true, but got false.  (Could this error message be improved?  "
     "If so, please report an enhancement request to PyTorch.)", "flash-attn-arch-unsupported"),
    ("RuntimeError: Expected is_sm90 || is_sm8x || is_sm75 to be true, but got false.", "flash-attn-arch-unsupported"),
    ("RuntimeError: Expected (head_size % 8 == 0) && (head_size <= 128) to be true, but got false.",
     "flash-attn-head-dim-unsupported"),
    ("RuntimeError: FlashAttention only supports Turing GPUs or newer.", "flash-attn-arch-unsupported"),
    ("RuntimeError: FlashAttentionHopper only supports Hopper GPUs or newer.", "flash-attn-arch-unsupported"),
    ("RuntimeError: FlashAttention forward only supports head dimension at most 256", "flash-attn-head-dim-unsupported"),
    ("RuntimeError: FlashAttention backward for head dim 256 with dropout, or head dim 224 with/without dropout "
     "requires A100/A800 or H100/H800", "flash-attn-head-dim-unsupported"),
    ("ImportError: /venv/lib/python3.11/site-packages/flash_attn_3/_C.abi3.so: undefined symbol: "
     "_ZN3c104cuda9SetDeviceEab", "flash-attn-abi-mismatch"),
    # NCCL's transports and torch's NCCL timeouts
    ("node1:1234:1300 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with "
     "error 12, opcode 0, len 0, vendor err 129", "nccl-failure"),
    ("node1:1234:1300 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<51234> with status=IBV_WC_RETRY_EXC_ERR(12) "
     "opcode=IBV_WC_SEND(0) vendor_err=129", "nccl-failure"),
    ("node2:88:120 [3] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer node1<58490>",
     "nccl-failure"),
    ("node2:88:120 [3] misc/socket.cc:484 NCCL WARN Net : Connect to 10.1.1.2<36477> failed : Connection refused",
     "nccl-failure"),
    ("node2:88:88 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found", "nccl-failure"),
    ("[rank1]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: "
     "6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.", "nccl-timeout"),
    ("[rank6]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a "
     "dump signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info.",
     "nccl-timeout"),
    ("RuntimeError: [Rank 0] Caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran "
     "for 1800297 milliseconds before timing out.", "nccl-timeout"),
    # TRL on Python <= 3.9 (no class name), Unsloth, xFormers, bitsandbytes 0.46+, Triton, pynvml
    ("TypeError: __init__() got an unexpected keyword argument 'dataset_text_field'", "trl-sfttrainer-api-change"),
    ("ImportError: Unsloth: Xformers was not installed correctly.", "xformers-abi-mismatch"),
    ("ImportError: Unsloth: You have torch = 2.1.2 but xformers = 0.0.26.post1.", "xformers-abi-mismatch"),
    ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
     "    PyTorch 2.2.1+cu118 with CUDA 1108 (you have 2.2.2+cu121)", "xformers-abi-mismatch"),
    ("RuntimeError: Attempted to use bitsandbytes native library functionality but it's not available.",
     "bitsandbytes-cuda-setup"),
    ("RuntimeError: Method 'cquantize_blockwise_fp16_nf4' not available in CPU-only version of bitsandbytes.",
     "bitsandbytes-cuda-setup"),
    ("RuntimeError: libcuda.so cannot found!\nPlease make sure GPU is set up and then run \"/sbin/ldconfig\" (requires "
     "sudo) to refresh the linker cache.", "libcuda-not-in-linker-cache"),
    ("pynvml.NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.", "driver-library-mismatch"),
])
def test_tool_wordings_name_their_rule(text, rule):
    assert ids(text.split("\n"))[:1] == [rule]


def test_a_compile_error_is_not_a_missing_compiler():
    assert ids(["error: command 'gcc' failed with exit status 1"]) == []


@pytest.mark.parametrize("text, rule, in_message", [
    # other releases and backends of wordings the held-out real logs showed (2026-11-23), from the
    # libraries' sources rather than those logs
    ("/usr/include/python3.10/Python.h:8:10: fatal error: pyconfig.h: No such file or directory",
     "python-headers-missing", "found no pyconfig.h"),
    ("/usr/local/cuda/include/host_config.h:115:2: error: #error -- unsupported GNU version! gcc versions later than 4.9 "
     "are not supported!", "nvcc-host-compiler-unsupported", "gcc up to 4.9"),
    ("RuntimeError: --cuda_ext was requested, but nvcc was not found.  Are you sure your environment has nvcc available?",
     "cuda-home-missing", "--cuda_ext's build found no nvcc"),
    ("mamba_ssm was requested, but nvcc was not found.  Are you sure your environment has nvcc available?",
     "cuda-home-missing", "mamba_ssm's build"),
    ("RuntimeError: No such operator xformers::efficient_attention_forward_generic - did you forget to build xformers "
     "with `python setup.py develop`?", "xformers-abi-mismatch", "xformers::efficient_attention_forward_generic"),
    ("RuntimeError: Only support head size 64 and 128 for now", "flash-attn-head-dim-unsupported", "head sizes 64 and 128"),
    ("ValueError: \n                Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit\n"
     "                the quantized model.", "weights-offloaded-to-cpu", "4-bit/8-bit"),
    ("ERROR: Need to compile C++ extensions to get sparse attention suport. Please run python setup.py build develop",
     "xformers-abi-mismatch", "0.13 or older"),
    ("`triton.ops` is gone: No module named \"triton.ops.matmul_perf_model\"", "bitsandbytes-triton-incompatible", "triton.ops"),
    ("ModuleNotFoundError: No module named `triton`", "triton-missing", "Triton is not installed"),
    ("failed to initialize NVML: Driver/Library version mismatch", "driver-library-mismatch", "kernel module"),
    # held-out round 2: each from the library's own source, other releases than the log showed
    ("server1:6601:6625 [0] include/socket.h:385 NCCL WARN Net : Connection closed by remote peer",
     "nccl-failure", "closed its socket:"),
    ("host:1:2 [0] misc/socket.cc:523 NCCL WARN Net : Connection closed by remote peer 10.0.0.2<43210>",
     "nccl-failure", "closed its socket (10.0.0.2<43210>)"),
    ("NCCL failure common.cu:921 'unhandled system error'", "nccl-failure", "(unhandled system error)"),
    ("node7: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / NET/IB : Got "
     "completion from peer 10.1.1.2<55021> with status=12'", "nccl-failure",
     "(remote process exited or there was a network error) (NET/IB : Got completion"),
    ("bin /opt/venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so", "bitsandbytes-cuda-setup",
     "CPU-only library (/opt/venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so)"),
    ("bin C:\\Users\\Jane Doe\\venv\\Lib\\site-packages\\bitsandbytes\\libbitsandbytes_cpu.dll", "bitsandbytes-cuda-setup",
     "Jane Doe"),
    ("CUDA SETUP: Problem: The main issue seems to be that the main CUDA runtime library was not detected.",
     "bitsandbytes-cuda-setup", "CUDA runtime library"),
    ("CUDA SETUP: Problem: The main issue seems to be that the main CUDA library was not detected or CUDA not installed.",
     "bitsandbytes-cuda-setup", "CUDA library it loads"),
])
def test_library_wordings_of_other_releases_name_their_rule(text, rule, in_message):
    findings = diagnose_lines(text.split("\n"))
    assert findings and findings[0].id == rule, [f.id for f in findings]
    assert in_message in findings[0].message


def test_case_insensitive_parts_leave_the_keyword_literal():
    # The keyword prefilter must stay a literal of every line a regex matches: a retyped capital is
    # allowed only in a scoped (?i:...) group outside it, never by a global (?i) flag.
    from gpudoctor.logs.signatures import load_signatures

    for sig in load_signatures():
        assert not sig.regex.flags & re.IGNORECASE, sig.id
        if "(?i:" in sig.regex.pattern:
            outside = re.sub(r"\(\?i:(?:[^()\\]|\\.|\([^()]*\))*\)", "\0", sig.regex.pattern)
            assert re.sub(r"\\(.)", r"\1", outside).find(sig.keyword) != -1, sig.id


def test_an_xformers_symbol_with_a_version_is_not_read_as_xformers_abi():
    line = "OSError: /venv/lib/python3.10/site-packages/xformers/_C.so: undefined symbol: cudaFoo, version libcudart.so.12"
    assert "xformers-abi-mismatch" not in ids([line])


@pytest.mark.parametrize("line", [
    "export PATH=/usr/local/cuda/bin ${PATH}; ls libbitsandbytes_cpu.so",  # '/bin ' is a directory, not bnb's print
    "cp -r bin libbitsandbytes_cpu_backup",  # no library file named
    "CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths...",
    "DEBUG: Possible options found for libcudart.so: {PosixPath('/usr/local/cuda/lib64/libcudart.so')}",
])
def test_bitsandbytes_lines_that_are_not_a_failure_stay_quiet(line):
    # The cudart warning alone is not a failure: bitsandbytes then searches /usr/local/cuda/lib64
    # and may find it there (bitsandbytes#838 did; its failure came later, in lines of its own).
    assert "bitsandbytes-cuda-setup" not in ids([line])
