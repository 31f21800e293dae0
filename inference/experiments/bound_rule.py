"""What bounds a step: one rule, decided from that run's measured figures, never from prose.

A step is limited by whatever it spends most of its time waiting for. The two roofs say how
close it came to each hardware limit:

    memory share  = bytes read ÷ seconds ÷ measured bandwidth     (1.0 = on the bandwidth roof)
    compute share = FLOPs ÷ seconds ÷ measured matmul peak        (1.0 = on the compute roof)

A step that reaches at least half of a roof is bound by that roof. One that reaches neither is
not limited by the hardware's two big numbers at all: if the step split measured the time
outside the real work (the dispatch of thousands of small operations on a CPU, the gaps between
kernel launches on a GPU) and that share is large, that is its bound; otherwise the verdict is
"neither roof", with the shares, and no cause is claimed that was not measured.

Arithmetic intensity alone (FLOPs per byte against the ridge point) says which roof a pass
*could* reach first, not which one it did: a decode step at batch 1 sits left of the ridge on
every machine, yet on a GPU it reaches a few percent of the bandwidth roof (launch-bound).

    >>> decide_bound(0.85, 0.02).kind
    'memory'
    >>> decide_bound(0.05, 0.01, overhead_share=0.7, device="cuda").kind
    'launches'
    >>> decide_bound(0.2, 0.1).kind
    'neither'
"""
from __future__ import annotations

from dataclasses import dataclass

ROOF_SHARE = 0.5  # reaching at least half of a roof: that roof bounds the step
OVERHEAD_SHARE = 0.4  # with neither roof reached, an overhead share this large is the bound

KINDS = ("memory", "compute", "dispatch", "launches", "neither")


@dataclass(frozen=True)
class BoundVerdict:
    kind: str  # one of KINDS
    memory_share: float  # achieved bytes/s ÷ measured bandwidth (0..~1)
    compute_share: float  # achieved FLOP/s ÷ measured matmul peak (0..~1; 0 if not measured)
    overhead_share: float | None  # share of the step outside the real work, if measured
    label: str  # the table's word: "memory", "arithmetic", "dispatch", "kernel launches", ...
    sentence: str  # the one sentence every view prints for this verdict


def decide_bound(memory_share: float, compute_share: float | None,
                 overhead_share: float | None = None, device: str = "cpu") -> BoundVerdict:
    """The bound of one measured step from its shares of each roof (and, when the step split
    measured it, the share of its time outside the real work). `compute_share` None: not
    measured for this step (then only the bandwidth roof can be named). `device`: "cpu" or
    "cuda" (names the overhead: dispatch on a CPU, kernel launches on a GPU)."""
    mem = max(memory_share, 0.0)
    comp = max(compute_share, 0.0) if compute_share is not None else 0.0
    shares = (f"{mem:.0%} of the measured bandwidth and {comp:.0%} of the measured matmul peak"
              if compute_share is not None else f"{mem:.0%} of the measured bandwidth")
    if max(mem, comp) >= ROOF_SHARE:
        if mem >= comp:
            return BoundVerdict("memory", mem, comp, overhead_share, "memory",
                                f"Bound by memory: it read at {shares}.")
        return BoundVerdict("compute", mem, comp, overhead_share, "arithmetic",
                            f"Bound by arithmetic: it reached {shares}.")
    gpu = str(device).startswith("cuda")
    if overhead_share is not None and overhead_share >= OVERHEAD_SHARE:
        kind, label = ("launches", "kernel launches") if gpu else ("dispatch", "dispatch")
        # on a CPU the time outside the matrix products is also real work (attention, copies,
        # norms): it bounds dispatch from above, and the sentence says so
        what = ("kernel launches", "to the GPU waiting between kernel launches") if gpu else (
            "small operations", "outside the matrix products, to thousands of small operations "
            "(attention, copies, norms) and starting each one (dispatch: at most that share)")
        return BoundVerdict(kind, mem, comp, overhead_share, label,
                            f"Bound by {what[0]}, not by either roof: it reached only {shares}, "
                            f"and {overhead_share:.0%} of the step went {what[1]}.")
    tail = (" The step split measured " f"{overhead_share:.0%} of it outside the real work."
            if overhead_share is not None else
            " What fills the rest is not measured here (see the step split on This machine).")
    return BoundVerdict("neither", mem, comp, overhead_share, "neither roof",
                        f"Neither roof bounds it: it reached only {shares}.{tail}")


def step_shares(flops: float, bytes_read: float, seconds: float, peak_gflops: float,
                bandwidth_gbs: float) -> tuple[float, float]:
    """(memory share, compute share) of one step from its theoretical FLOPs and bytes, its
    measured seconds and the machine's two measured roofs."""
    if seconds <= 0:
        return 0.0, 0.0
    memory = bytes_read / seconds / (bandwidth_gbs * 1e9) if bandwidth_gbs > 0 else 0.0
    compute = flops / seconds / (peak_gflops * 1e9) if peak_gflops > 0 else 0.0
    return memory, compute
