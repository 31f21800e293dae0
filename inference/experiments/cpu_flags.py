"""What /proc/cpuinfo says of this CPU: whether it has native bfloat16 arithmetic (lesson 6
says so only where checked) and its model name (the bench labels figures with it)."""
from __future__ import annotations

import platform

import torch

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bfloat16 arithmetic


def native_bf16(cpuinfo: str) -> bool | None:
    """Native bfloat16 arithmetic from /proc/cpuinfo's `flags` lines (None: no such lines)."""
    flags = {f for line in cpuinfo.splitlines() if line.split(":")[0].strip() == "flags"
             for f in line.split(":", 1)[-1].split()}
    if not flags:
        return None
    return any(f in flags for f in BF16_FLAGS)


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def device_bf16(device: torch.device | str) -> bool | None:
    """Native bfloat16 on this device's CPU; None on a GPU (its flags say nothing there)."""
    return native_bf16(read_cpuinfo()) if torch.device(device).type == "cpu" else None


def cpu_name(cpuinfo: str) -> str:
    """The CPU's model name from /proc/cpuinfo's text ('' when it has none)."""
    return next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                 if line.startswith("model name")), "")


def this_cpu() -> str:
    return cpu_name(read_cpuinfo()) or platform.processor() or "cpu"
