"""What the CPU computes natively, from Linux's /proc/cpuinfo: the one place that reads its
flags (for bfloat16: `has_native_bfloat16`; for the results' names and JSON: `cpu_flags`);
and what a compiler made of a product (`hlo_dots`: the dtypes of an XLA program's dots).

Imports nothing heavy, so that `zoo bench`'s orchestrator and `zoo --help` can ask.
"""

from __future__ import annotations

import collections
import os
import re

CPUINFO = "/proc/cpuinfo"
# /proc/cpuinfo flags of CPUs that compute bfloat16 products natively: AVX-512 BF16's dot
# products (VDPBF16PS) and AMX's bfloat16 tile products (TDPBF16PS).
NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# The flags that decide the speed of the zoo's products in each precision, in the order a
# result names them (float32: avx2/avx512f; bfloat16: the two above; int8: VNNI and AMX).
SPEED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
               "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags(cpuinfo: str | os.PathLike = CPUINFO) -> set[str] | None:
    """Every flag on the `flags` lines of `cpuinfo`; None where there is no such file."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return flags


def speed_flags(cpuinfo: str | os.PathLike = CPUINFO) -> list[str]:
    """The `SPEED_FLAGS` this CPU has, in their order (empty where `cpuinfo` is absent)."""
    flags = cpu_flags(cpuinfo) or set()
    return [flag for flag in SPEED_FLAGS if flag in flags]


def has_native_bfloat16(cpuinfo: str | os.PathLike = CPUINFO) -> bool | None:
    """Whether the CPU computes bfloat16 products natively (`NATIVE_BFLOAT16_FLAGS`); None
    where there is no `cpuinfo` to tell."""
    flags = cpu_flags(cpuinfo)
    return None if flags is None else any(flag in flags for flag in NATIVE_BFLOAT16_FLAGS)


def hlo_dots(hlo: str) -> collections.Counter:
    """`{(result dtype, operand dtype): count}` of the `dot` instructions of an HLO text
    (an operand's dtype from the instruction or parameter that defines it): an XLA program's
    products as it runs them, bfloat16 or widened to float32."""
    defined = dict(re.findall(r"%?([\w.-]+) = (\w+)\[", hlo))
    defined.update(re.findall(r"([\w.-]+): (\w+)\[", hlo))  # computations' parameters
    found: collections.Counter = collections.Counter()
    for result, operand in re.findall(r"= (\w+)\[[^\n]*?\bdot\(%?([\w.-]+)", hlo):
        found[(result, defined.get(operand, "?"))] += 1
    return found
