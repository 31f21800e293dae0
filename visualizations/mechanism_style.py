"""The mechanism diagram's CSS: colours, the beat's keyframes and the controls, with no script.

Every animated shape reads its timing from CSS custom properties, so one number drives a beat:
`--measured` (seconds, on each lane) × `--slow` (the speed buttons' factor) = `--beat`; a shape
starts at `--at` × beat and lasts `--for` × beat. The controls are plain inputs (Gradio's
`gr.HTML` runs no inline script): Replay swaps each animation for an identical copy under
another name (a changed `animation-name` restarts it), Pause sets `animation-play-state`, Speed
sets `--slow`. With `prefers-reduced-motion: reduce` every shape shows its end state.
"""
from __future__ import annotations

from .style import PALETTE

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
_BASE = """
.mech { background: #ffffff; color: #111111; border: 2px solid #222222; border-radius: 10px;
  padding: 10px 12px; font-family: system-ui, sans-serif; }
.mech-head { font-size: 1.15em; font-weight: 700; margin: 2px 0 6px; }
.mech-caption { font-size: 0.95em; margin-top: 4px; }
.mech-key { display: inline-block; width: 1em; height: 1em; vertical-align: -0.15em;
  border: 1px solid #111; margin: 0 3px 0 8px; }
.mech-toggle { position: absolute; opacity: 0; width: 1px; height: 1px; pointer-events: none; }
.mech-controls { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 8px;
  margin-bottom: 6px; }
.mech-controls label { cursor: pointer; border: 2px solid #222222; border-radius: 6px;
  padding: 3px 10px; background: #f2f2f2; color: #111111; font-weight: 600;
  user-select: none; }
.mech-controls label:hover { background: #dfeaf3; }
.mech-say { display: none; font-weight: 600; }
.mech-pause:checked ~ .mech-controls .mech-pause-label { background: #111111; color: #ffffff; }
.mech-pause:checked ~ .mech-stage * { animation-play-state: paused !important; }
.mech-still { display: none; font-style: italic; }
.mech svg { width: 100%; height: auto; display: block; }
.mech svg text { font-family: system-ui, sans-serif; fill: #111111; }
.mech svg .mech-chip-text { font-family: ui-monospace, monospace; }
.mech-lane { --beat: calc(var(--measured) * var(--slow)); }
.mech-anim { animation-duration: calc(var(--beat) * var(--for));
  animation-delay: calc(var(--beat) * var(--at)); animation-fill-mode: both;
  animation-timing-function: linear; animation-iteration-count: 1; }
.mech-clock { transform-box: fill-box; transform-origin: left center; }
@media (prefers-reduced-motion: reduce) {
  .mech-stage * { animation: none !important; }
  .mech-still { display: inline; }
}
"""


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
