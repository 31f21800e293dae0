"""The class served by this app's server and by vLLM, side by side, as `make bench-serving` (or
`make bench`) measured it: this machine's own newest results, else the run recorded in
`assets/serving_vs_vllm.json`; a figure never appears without the machine it was measured on."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inference.experiments.quiet_reference import this_cpu

ROOT = Path(__file__).resolve().parents[2]
RESULTS = (ROOT / "bench" / "serving-results.json", ROOT / "bench" / "results.json")
RECORDED = ROOT / "assets" / "serving_vs_vllm.json"


@dataclass(frozen=True)
class ServedClass:
    tokens_per_s: float
    p95_latency_s: float
    p95_ttft_s: float


@dataclass(frozen=True)
class PeerComparison:
    app: ServedClass
    vllm: ServedClass
    clients: int
    new_tokens: int
    vllm_version: str
    machine: str  # the CPU the bench ran on, with its core count where the record has it
    when: str  # "YYYY-MM-DD HH:MM:SS", the bench's own clock
    here: bool  # measured on this machine (its own bench results), not recorded elsewhere
    source: str = "make bench-serving"  # the command that measured it


def read_comparison(results: dict, here_cpu: str | None = None,
                    source: str = "make bench-serving") -> PeerComparison | None:
    """The comparison in a bench results record, or None where it holds none (vLLM skipped,
    a field missing or wrong). `here_cpu`: this machine's CPU, to say where it ran."""
    try:
        serving, when, cpu = results["serving"], str(results["when"]), _cpu(results["machine"])
        cores = results.get("cores")
        machine = f"{cores}-core {cpu}" if isinstance(cores, int) else cpu
        # the two engines timed by the same client (`make bench`'s 30 x 48 workload) if any
        same_client = (serving.get("workloads") or {}).get("class_30x48") or {}
        pair = ((same_client["app"], same_client["vllm"]) if same_client.get("vllm")
                else (serving["batched"], serving["vllm"]))
        sides = [ServedClass(float(s["tokens_per_s"]), float(s["p95_latency_s"]),
                             float(s["p95_ttft_s"])) for s in pair]
        return PeerComparison(*sides, int(serving["clients"]), int(serving["new_tokens"]),
                              str(serving["vllm"].get("version", "?")), machine, when,
                              here=here_cpu is not None and cpu == here_cpu, source=source)
    except (KeyError, TypeError, ValueError):
        return None


def _cpu(machine) -> str:
    """The CPU in a results record: a name, or a dict whose device reads "cpu (Xeon ...)"."""
    if not isinstance(machine, dict):
        return str(machine)
    device = str(machine["device"])
    return device[device.index("(") + 1:device.rindex(")")] if "(" in device else device


def serving_comparison(results: tuple[Path, ...] = RESULTS, recorded: Path = RECORDED,
                       here_cpu: str | None = None) -> PeerComparison | None:
    """This machine's newest comparison, else the recorded one (None if that is unreadable)."""
    here_cpu = this_cpu() if here_cpu is None else here_cpu
    found = [c for c in (_read(p, here_cpu) for p in results) if c is not None and c.here]
    # else the one measured elsewhere, whatever its CPU's name
    return max(found, key=lambda c: c.when, default=None) or _read(recorded, None)


def _read(path: Path, here_cpu: str | None) -> PeerComparison | None:
    source = "make bench" if path.name == "results.json" else "make bench-serving"
    try:
        return read_comparison(json.loads(path.read_text()), here_cpu, source)
    except (OSError, ValueError):
        return None
