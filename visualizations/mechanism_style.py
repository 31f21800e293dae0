"""The mechanism diagram's CSS (the fixed rules in `assets/mechanism.css`): colours, the beat's
keyframes and the controls, with no script.

Every animated shape reads its timing from CSS custom properties, so one number drives a beat:
`--measured` (seconds, on each lane) × `--slow` (the speed buttons' factor) = `--beat`; a shape
starts at `--at` × beat and lasts `--for` × beat. The controls are plain inputs (Gradio's
`gr.HTML` runs no inline script): Replay swaps each animation for an identical copy under
another name (a changed `animation-name` restarts it), Pause sets `animation-play-state`, Speed
sets `--slow`. With `prefers-reduced-motion: reduce` every shape shows its end state.
"""
from __future__ import annotations

from pathlib import Path

from .style import PALETTE

_BASE = (Path(__file__).resolve().parent.parent / "assets" / "mechanism.css").read_text(
    encoding="utf-8")
FACTORS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)  # the slow-downs on offer

PROMPT_COLOUR = PALETTE["blue"]  # cached positions of the prompt
GENERATED_COLOUR = PALETTE["orange"]  # cached positions of generated tokens
LIT_COLOUR = PALETTE["yellow"]  # a layer group working on the tokens
READ_COLOUR = PALETTE["vermillion"]  # the cache being read
RECOMPUTE_COLOUR = PALETTE["vermillion"]  # tokens fed again because nothing was kept

_KEYFRAMES = {
    "climb": "from { transform: translateY(0); opacity: 1; } "
             "92% { opacity: 1; } to { transform: translateY(var(--rise)); opacity: 0; }",
    "lit": f"0% {{ fill: #e9e9e9; }} 25% {{ fill: {LIT_COLOUR}; }} 100% {{ fill: #e9e9e9; }}",
    "read": "0% { opacity: 0; } 30% { opacity: 1; } 100% { opacity: 0; }",
    "appear": "from { opacity: 0; } to { opacity: 1; }",
    "clock": "from { transform: scaleX(0); } to { transform: scaleX(1); }",
}


def mechanism_css() -> str:
    """The diagram's stylesheet (inlined in each diagram, so it stands alone)."""
    rules = [_BASE]
    for name, frames in _KEYFRAMES.items():
        rules.append(f"@keyframes mech-{name} {{ {frames} }}")
        rules.append(f"@keyframes mech-{name}-again {{ {frames} }}")
        rules.append(f".mech-do-{name} {{ animation-name: mech-{name}; }}")
        rules.append(f".mech-replay:checked ~ .mech-stage .mech-do-{name} "
                     f"{{ animation-name: mech-{name}-again; }}")
    for f in FACTORS:
        rules.append(f".mech-s{f}:checked ~ .mech-stage {{ --slow: {f}; }}")
        rules.append(f".mech-s{f}:checked ~ .mech-controls .mech-say-{f} {{ display: inline; }}")
        rules.append(f".mech-s{f}:checked ~ .mech-controls .mech-speed-{f} "
                     "{ background: #111111; color: #ffffff; }")
    return "\n".join(rules)
