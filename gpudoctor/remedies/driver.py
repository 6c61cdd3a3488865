"""Remedies for the driver and libcuda rules."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..model import Fix, MakeDir, RemoveFromPathVar, RootCommand, SetEnv, SuggestCommand, Symlink, WriteFile

LDCONF_FILE = "/etc/ld.so.conf.d/gpudoctor-libcuda.conf"

CHECK_ON_THE_MACHINE = Fix("manual", "Run `gpudoctor check` on the machine that failed: it names the exact fix for "
                                     "that machine's paths.", (SuggestCommand("gpudoctor check"),))


def no_nvidia_driver(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Install the NVIDIA driver (or start the container with --gpus all / the NVIDIA container "
                          "toolkit) and reboot.", (SuggestCommand("nvidia-smi"),))]


def no_gpu_visible(v: Mapping[str, Any]) -> list[Fix]:
    if v.get("cuda_visible_devices_hides_all"):
        return [Fix("manual", "Unset CUDA_VISIBLE_DEVICES or set it to the GPU indices to use.",
                    (SuggestCommand("unset CUDA_VISIBLE_DEVICES"),))]
    return [Fix("manual", "Check `nvidia-smi` and CUDA_VISIBLE_DEVICES; in a container or job, request a GPU "
                          "(--gpus all).", (SuggestCommand("nvidia-smi -L"),))]


def driver_library_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Reboot (or unload and reload the nvidia kernel modules) so the running kernel module "
                          "matches the installed driver libraries; in a container, make its driver libraries match "
                          "the host's.")]


def driver_too_old(v: Mapping[str, Any]) -> list[Fix]:
    need = v.get("min_driver")
    cuda = v.get("torch_cuda")
    what = f"Upgrade the NVIDIA driver to >= {need}" if need else "Upgrade the NVIDIA driver"
    also = f", or install a torch build for an older CUDA than {cuda}" if cuda else ", or install a torch build for an older CUDA"
    return [Fix("manual", what + also + ".")]


def cuda_compat_lib_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    directory = v.get("compat_dir")
    if not directory:
        return [CHECK_ON_THE_MACHINE]
    return [Fix("user", f"Remove {directory} from LD_LIBRARY_PATH.", (RemoveFromPathVar("LD_LIBRARY_PATH", directory),))]


def libcuda_stub_at_runtime(v: Mapping[str, Any]) -> list[Fix]:
    stubs = v.get("stub_dirs") or ()
    if not stubs and v.get("stub_path") not in (None, "", "?"):  # the stub a log shows loaded
        stubs = (posixpath.dirname(v["stub_path"]),)
    if not stubs:
        return [CHECK_ON_THE_MACHINE]
    return [Fix("user", f"Remove {', '.join(stubs)} from LD_LIBRARY_PATH (a stub libcuda is for linking only).",
                tuple(RemoveFromPathVar("LD_LIBRARY_PATH", s) for s in stubs))]


def libcuda_not_in_linker_cache(v: Mapping[str, Any]) -> list[Fix]:
    dirs = v.get("libcuda_dirs") or ()
    if not dirs:
        return [CHECK_ON_THE_MACHINE]
    where = dirs[0]
    return [Fix("user", f"Put {where} on LD_LIBRARY_PATH and point Triton at it.",
                (SetEnv("LD_LIBRARY_PATH", where, prepend=True), SetEnv("TRITON_LIBCUDA_PATH", where))),
            Fix("system", f"Register {where} with the dynamic linker.",
                (WriteFile(LDCONF_FILE, where + "\n", needs_root=True), RootCommand(("ldconfig",))))]


def libcuda_unversioned_missing(v: Mapping[str, Any]) -> list[Fix]:
    # The user fix puts the private symlink on LIBRARY_PATH only. The log path used to also set
    # TRITON_LIBCUDA_PATH to that directory: Triton then links `-l:libcuda.so.1` (after
    # triton-lang/triton#8668) against a directory holding only libcuda.so, which fails, so the
    # LIBRARY_PATH-only fix is the one that works with every Triton version.
    dirs, gd = v.get("libcuda_dirs") or (), v.get("dirs")
    if not dirs or gd is None:
        return [CHECK_ON_THE_MACHINE] if not dirs else []
    target_dir = dirs[0]
    stub = posixpath.join(gd.stub_lib_dir, "libcuda.so")
    system_link = posixpath.join(target_dir, "libcuda.so")
    return [
        Fix("user", f"Without root: a private libcuda.so -> {target_dir}/libcuda.so.1 on LIBRARY_PATH.",
            (MakeDir(gd.stub_lib_dir), Symlink(stub, posixpath.join(target_dir, "libcuda.so.1")),
             SetEnv("LIBRARY_PATH", gd.stub_lib_dir, prepend=True))),
        Fix("system", f"Create the unversioned symlink in {target_dir}.",
            (RootCommand(("ln", "-s", "libcuda.so.1", system_link), undo_argv=("rm", system_link)),)),
    ]
