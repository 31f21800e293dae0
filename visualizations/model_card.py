"""The header card: which model, on what hardware, how big, from which source."""
from __future__ import annotations

import html


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KB' (decimal units, as memory bandwidth is quoted)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def model_card_html(info) -> str:
    """HTML for a ModelInfo-like object (name, source, device, dtype, threads, ...)."""
    items = [
        ("Model", info.name), ("Source", info.source), ("Device", info.device),
        ("Weights dtype", info.dtype), ("CPU threads", str(info.threads)),
        ("Parameters", f"{info.parameters / 1e6:.1f} M"),
        ("Weight size", human_bytes(info.weight_bytes)),
        ("Shape", f"{info.layers} layers · {info.heads} query heads · {info.kv_heads} KV heads "
                  f"· head dim {info.head_dim}"),
    ]
    cells = "".join(f"<div class='lab-card-item'><span>{html.escape(k)}</span>"
                    f"<b>{html.escape(v)}</b></div>" for k, v in items)
    note = f"<div class='lab-card-note'>⚠ {html.escape(info.note)}</div>" if info.note else ""
    reason = getattr(info, "dtype_reason", "")
    because = reason.split(": ", 1)[-1]
    why = (f"<div class='lab-card-why'><b>Why {html.escape(info.dtype)}?</b> "
           f"{html.escape(because[:1].upper() + because[1:])}</div>" if reason else "")
    return f"<div class='lab-card'>{cells}</div>{why}{note}"
