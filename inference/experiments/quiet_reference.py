"""A quiet reference per machine: the first quiet run of each headline figure, kept on disk
(`quiet-reference.json` in the app's cache folder) with the time and the machine's name; when a
live run is busy, the screen shows it big and the live figure small beside it. Not covered: a
machine changed under the same name. /proc/cpuinfo also says whether the CPU has native bfloat16.
"""
from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime

import torch

from ..config import weight_cache_root

FILE = "quiet-reference.json"
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bfloat16 arithmetic
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuietFigure:
    key: str  # what was measured, and how: "kv_race 24+30 float32"
    value: float  # the figure (e.g. 2.9 for "2.9×")
    label: str  # how it reads with its spread: "2.9×, range 2.7–3.0 over 5 rounds"
    measured_at: str  # local time, ISO 8601 to the second
    machine: str  # this_machine() when it was measured

    def when(self, now: datetime | None = None) -> str:
        """'09:12' today, else '2 Dec 09:12'."""
        t, now = datetime.fromisoformat(self.measured_at), now or datetime.now()
        return t.strftime("%H:%M") if t.date() == now.date() else f"{t.day} {t:%b %H:%M}"


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


def this_machine() -> str:
    name = f"{this_cpu()}, {os.cpu_count() or 1} cores"
    if torch.cuda.is_available():
        name += f", {torch.cuda.get_device_name()}"
    return name


def default_path() -> str:
    """The file in the app's cache folder, or LLM_LAB_QUIET_REFERENCE (the tests' own)."""
    return os.environ.get("LLM_LAB_QUIET_REFERENCE") or os.path.join(weight_cache_root(), FILE)


def read(path: str | None = None, machine: str | None = None) -> dict[str, QuietFigure]:
    """This machine's references by key; {} for a missing, unreadable or other machine's file."""
    path, machine = path or default_path(), machine or this_machine()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        refs = {k: QuietFigure(**v) for k, v in data["figures"].items()}
        written_by = data["machine"]
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("quiet reference %s ignored: cannot be read (%s)", path, e)
        return {}
    if written_by != machine or any(r.machine != machine for r in refs.values()):
        log.warning("quiet reference %s ignored: written on %r, this is %r", path, written_by,
                    machine)
        return {}
    return refs


def keep_if_quiet(key: str, value: float, label: str, noise, path: str | None = None,
                  machine: str | None = None, now: datetime | None = None) -> QuietFigure | None:
    """The reference for `key` on file, else this run's figure, written when `noise` judged
    it quiet. None: no quiet run of it yet."""
    path, machine = path or default_path(), machine or this_machine()
    refs = read(path, machine)
    if key in refs or noise is None or noise.busy:
        return refs.get(key)
    at = (now or datetime.now()).isoformat(timespec="seconds")
    refs[key] = QuietFigure(key, float(value), label, at, machine)
    data = {"machine": machine, "figures": {k: asdict(r) for k, r in refs.items()}}
    try:  # written whole, then renamed: a reader never sees half a file
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache folder: the figure is still this run's
        log.warning("quiet reference %s not written (%s)", path, e)
    return refs[key]


def for_race(summary, dtype: str, noise) -> QuietFigure | None:
    """The KV race's robust speed-up (a `RaceSummary`); an impossible one only reads."""
    if summary.robust is None:
        return None
    key = f"kv_race {summary.new_tokens} tokens after {summary.prompt_tokens} {dtype}"
    return keep_if_quiet(key, summary.speedup, summary.robust.label(),
                         None if summary.impossible else noise)


def for_sweep(update, dtype: str, noise) -> QuietFigure | None:
    """The largest batch's gain over batch 1 (a finished `SweepUpdate`), all figures possible."""
    if not update.finished or len(update.points) < 2:
        return None
    one, big = update.points[0], update.points[-1]
    key = (f"batch_gain {big.batch}÷{one.batch} {len(big.step_times)} steps after "
           f"{big.prompt_tokens} {dtype}")
    gain = big.gain_over(one)
    possible = not any(p.impossible for p in update.points)
    return keep_if_quiet(key, gain.estimate, gain.label(), noise if possible else None)


def for_decode(r, model: str, new_tokens: int, noise) -> QuietFigure | None:
    """The batch-1 decode speed (a `Roofline`); one past the ceiling only reads."""
    if r.measured_tokens_per_s is None:
        return None
    key = f"decode_tokens_per_s {model} batch 1, {new_tokens} tokens"
    return keep_if_quiet(key, r.measured_tokens_per_s, f"{r.measured_tokens_per_s:.1f} tokens/s",
                         None if r.impossible else noise)
