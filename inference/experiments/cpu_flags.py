"""What /proc/cpuinfo says of this CPU: whether it has native bfloat16 arithmetic, so lesson 6
says so only where it was checked (on a GPU the CPU's flags say nothing, and the answer is
None), and its model name, which the bench and the vLLM comparison label figures with. Pure
`native_bf16` and `cpu_name` over the file's text."""
from __future__ import annotations

import platform

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


def cpu_name(cpuinfo: str) -> str:
    r"""The CPU's model name from the text of /proc/cpuinfo ('' when it has none).

    >>> cpu_name("processor : 0\nmodel name : Intel(R) Xeon(R) Processor\n"), cpu_name("")
    ('Intel(R) Xeon(R) Processor', '')
    """
    return next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                 if line.startswith("model name")), "")


def this_cpu() -> str:
    """This machine's CPU model name, or what Python knows of it where /proc has none."""
    return cpu_name(read_cpuinfo()) or platform.processor() or "cpu"
