"""Parsers on real captured output (fixtures/outputs, fixtures/snapshots) and on garbage."""

import json
import os

import pytest

from gpudoctor.probes import parse

from rule_cases import FIXTURES

OUTPUTS = os.path.join(FIXTURES, "outputs")


def read(name):
    with open(os.path.join(OUTPUTS, name), encoding="utf-8") as handle:
        return handle.read()


def snapshot_file(snapshot, path):
    with open(os.path.join(FIXTURES, "snapshots", snapshot, "snapshot.json")) as handle:
        return json.load(handle)["files"][path]["text"]


def test_nvcc_release():
    assert parse.nvcc_release(read("nvcc-13.0-version.txt")) == (13, 0)


def test_gcc_version():
    assert parse.compiler_version("gcc", read("gcc-12-dumpfullversion.txt")) == (12, 2, 0)


def test_ldconfig_lines():
    entries = parse.ldconfig_entries(read("ldconfig-p-debian12-no-libcuda.txt"))
    assert len(entries) == 39  # the header line "536 libs found in cache" is not an entry
    assert entries[0] == ("libz3.so.4", "libc6,x86-64", "/lib/x86_64-linux-gnu/libz3.so.4")


def test_host_config_limits_from_cuda_13():
    text = snapshot_file("cpu-baseline", "/usr/local/cuda/include/crt/host_config.h")
    assert parse.host_compiler_limits(text) == {"gcc": 15, "clang": 20}


@pytest.mark.parametrize("text,expected", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 11 2025\nGCC version:  gcc version 13.3.0", "580.95.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build", "580.159.04"),
    ("garbage \x00\ufffd", None),
    ("", None),
])
def test_kernel_module_version(text, expected):
    assert parse.kernel_module_version(text) == expected


@pytest.mark.parametrize("garbage", ["", "\x00\x01\x02", "\ufffd" * 1000, "release", "release x.y", "a" * 100000])
def test_parsers_survive_garbage(garbage):
    assert parse.nvcc_release(garbage) is None
    assert parse.cuda_version_json(garbage) is None
    assert parse.host_compiler_limits(garbage) == {}
    assert parse.compiler_version("gcc", garbage) is None
    assert parse.compiler_version("clang", garbage) is None
    assert parse.ldconfig_entries(garbage) == []


def test_version_helpers():
    assert parse.cuda_from_int(13000) == (13, 0) and parse.cuda_from_int(12040) == (12, 4)
    assert parse.cuda_from_int(None) is None
    assert parse.libcuda_file_version("libcuda.so.580.95.05") == "580.95.05"
    assert parse.libcuda_file_version("libcuda.so.1") is None or parse.libcuda_file_version("libcuda.so.1") == "1"
    assert parse.cuda_version_json('{"cuda": {"version": "12.4.1"}}') == (12, 4)
    assert parse.cuda_version_json('{"cuda": 3}') is None
