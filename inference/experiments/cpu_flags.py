"""Whether this CPU has native bfloat16 arithmetic, read from its own flags (/proc/cpuinfo), so
lesson 6 says so only where it was checked. Pure `native_bf16` over the file's text; on a GPU
the CPU's flags say nothing, and the answer is None."""
from __future__ import annotations

import torch

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bfloat16 arithmetic


def native_bf16(cpuinfo: str) -> bool | None:
    """Whether a CPU has native bfloat16 arithmetic, from the text of /proc/cpuinfo: True or
    False from its `flags` lines, None when there are none (not x86, or nothing to read).

    >>> native_bf16("flags : fpu avx2 avx512_bf16"), native_bf16("flags : avx2"), native_bf16("")
    (True, False, None)
    """
    flags = {f for line in cpuinfo.splitlines() if line.split(":")[0].strip() == "flags"
             for f in line.split(":", 1)[-1].split()}
    if not flags:
        return None
    return any(f in flags for f in BF16_FLAGS)


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    """The text of /proc/cpuinfo ('' where there is none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def device_bf16(device: torch.device | str) -> bool | None:
    """Native bfloat16 on this device's CPU; None on a GPU (its flags say nothing there)."""
    return native_bf16(read_cpuinfo()) if torch.device(device).type == "cpu" else None
