"""Decode CUDA error numbers and enum names in a log line into catalogue rules.

The table (``gpudoctor/rules/cuda_errors.toml``) holds the runtime (cudaError_t) and driver
(CUresult) values that name a rule. A line like ``CUDA error: 35``, ``Error 804: ...``,
``CUresult 34`` or ``cudaErrorNoKernelImageForDevice`` then becomes a hit of a signature made
from the table entry, so it is ranked and reported like any other signature.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass

from ..knowledge import read_rules_file
from .signatures import Signature

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# Literals a decodable line contains; the matcher scans for them like signature triggers. Both
# are triggers of signatures anyway, so decoding costs no extra pass over the log: a number is
# decoded on lines that say "error" or "CUDA" (a bare "CUresult 34" with neither is not).
TRIGGERS = ("rror", "CUDA")

# A number is trusted only right after CUDA's own words for an error: "CUDA error: 35",
# "cudaError 209", "CUresult 34", or "Error 804:" / "error code 209" on a line that mentions
# CUDA (torch's cudaGetDeviceCount warning). Every repetition is bounded.
_NUMBER = re.compile(
    r"(?:(?:CUDA|[Cc]uda[A-Za-z]{0,40})[^\n]{0,100}?(?:\b(?:[Ee]rror|ERROR)(?: code)?|(?<!exit )\bcode)|\bCUresult)"
    r"[ :=#(]{1,4}(?P<code>\d{1,4})\b"
)
_NAME = re.compile(r"\b(?P<name>cudaError[A-Z][A-Za-z]{1,60}|CUDA_ERROR_[A-Z_]{2,60})\b")


@dataclass(frozen=True)
class CudaError:
    """One entry of the CUDA error table (``rules/cuda_errors.toml``): an error value with its runtime and
    driver enum names, the string CUDA prints for it, the catalogue rule it shows, and the signature its
    hits are ranked by. ``numeric`` False: only its enum names decode (the bare number is too common in logs)."""

    code: int
    runtime: str
    driver: str
    text: str
    rule: str
    numeric: bool
    weight: int
    signature: Signature


def _signature(raw: dict) -> Signature:
    names = " / ".join(n for n in (raw["runtime"], raw["driver"]) if n)
    return Signature(
        id=f"cuda-error-{raw['code']}",
        rule=raw["rule"],
        keyword=TRIGGERS[0],
        regex=_NUMBER,
        weight=int(raw["weight"]),
        message=f"CUDA reported error {{cuda_error_code}} ({names}: \"{raw['text']}\").",
        source="gpudoctor/rules/cuda_errors.toml (NVIDIA driver_types.h / cuda.h)",
    )


@functools.lru_cache(maxsize=None)
def load_cuda_errors() -> tuple[CudaError, ...]:
    text = read_rules_file("cuda_errors.toml")
    return tuple(
        CudaError(int(raw["code"]), raw["runtime"], raw["driver"], raw["text"], raw["rule"],
                  bool(raw["numeric"]), int(raw["weight"]), _signature(raw))
        for raw in tomllib.loads(text)["error"]
    )


@functools.lru_cache(maxsize=None)
def _tables() -> tuple[dict[int, CudaError], dict[str, CudaError]]:
    by_code = {e.code: e for e in load_cuda_errors() if e.numeric}
    by_name = {n: e for e in load_cuda_errors() for n in (e.runtime, e.driver) if n}
    return by_code, by_name


def decode(line: str) -> list[CudaError]:
    """The table entries a line names, by enum name, by number or by CUDA's own error string."""
    by_code, by_name = _tables()
    found: list[CudaError] = []
    for entry in load_cuda_errors():
        if entry.numeric and entry.text in line:
            found.append(entry)
    if "CUDA_ERROR_" in line or "cudaError" in line:
        for match in _NAME.finditer(line):
            entry = by_name.get(match.group("name"))
            if entry is not None and entry not in found:
                found.append(entry)
    for match in _NUMBER.finditer(line):
        entry = by_code.get(int(match.group("code")))
        if entry is not None and entry not in found:
            found.append(entry)
    return found
