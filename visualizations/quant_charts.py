"""Lesson 6's views, from `ModeReport`s: bytes per weight against speed and quality, each mode's
text beside fp32's, and every measured number per precision mode."""
from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .cards import WAITING, Card, cards_html, human_bytes, md_table, times
from .glossary import NOTES
from .noise_view import busy_notice_html, quiet_note, reference_card, supports_verdict
from .roofline_charts import FASTER, MB
from .style import PALETTE, SEQUENCE, empty_state, styled

NO_MODES_CARDS = NOTES["no_modes_cards"]
DIFFERS = f"background:{PALETTE['orange']}55;border-bottom:2px solid {PALETTE['vermillion']}"


@empty_state("Bars per mode appear as each one is measured.")
def mode_bars_figure(reports, caption: str = "") -> go.Figure:
    keys = [r.key for r in reports]
    panels = [
        ("Weights (MB)", [r.weight_bytes / MB for r in reports], "{:.0f}"),
        ("Decode (tokens/s)", [r.decode_tokens_per_s for r in reports], "{:.1f}"),
        ("Same top-1 as fp32 (%)", [100 * r.top1_agreement for r in reports], "{:.0f}"),
        ("Perplexity (lower: better)", [r.perplexity for r in reports], "{:.2f}")]
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.2, vertical_spacing=0.16)
    for n, (title, values, fmt) in enumerate(panels):
        row, col = divmod(n, 2)
        fig.add_trace(go.Bar(x=keys, y=values, name=title, showlegend=False,
                             marker_color=[SEQUENCE[i % len(SEQUENCE)] for i in range(len(keys))],
                             text=[fmt.format(v) for v in values], textposition="outside",
                             cliponaxis=False), row=row + 1, col=col + 1)
    fig = styled(fig, "Each precision mode", "", "", caption, height=560,
                 note="Size, speed and quality, each measured.")
    for n, (title, _, _) in enumerate(panels):  # each panel named by its y axis
        fig.update_yaxes(title_text=title, rangemode="tozero", row=n // 2 + 1, col=n % 2 + 1)
    return fig


def mode_table(reports) -> tuple[list[str], list[list]]:
    headers = ["mode", "weights (MB)", "× fp32", "read per token (MB)", "prefill (ms)",
               "long prefill (s)", "decode (tok/s)", "top-1 agree (%)",
               "agree where fp32 decided (%)", "KL (nats)", "perplexity", "kernel"]
    rows = [[r.key, round(r.weight_bytes / MB, 1), round(r.ratio_to_fp32, 3),
             round(r.bytes_per_token / MB, 1), round(r.prefill_seconds * 1000),
             f"{r.text_prefill_seconds:.2f} ({r.text_tokens} tok)",
             round(r.decode_tokens_per_s, 1), round(100 * r.top1_agreement, 1),
             f"{100 * r.top1_decided:.0f} ({r.decided_positions} positions)",
             round(r.kl_mean, 4), round(r.perplexity, 2), r.kernel] for r in reports]
    return headers, rows


def first_difference(reference_ids, ids) -> int | None:
    """Index of the first token that differs from the reference (None if all the same)."""
    shorter = None if len(reference_ids) == len(ids) else min(len(reference_ids), len(ids))
    return next((i for i, (a, b) in enumerate(zip(reference_ids, ids)) if a != b), shorter)


def side_by_side_html(reports) -> str:
    """Each mode's greedy text, tokens that differ from fp32's at the same position highlighted."""
    if not reports:
        return "<p><i>Generated texts appear here, side by side.</i></p>"
    ref = next((r for r in reports if r.key == "fp32"), reports[0])
    cards = []
    for r in reports:
        spans = []
        for i, (tid, piece) in enumerate(zip(r.token_ids, r.pieces)):
            text = html.escape(piece).replace("\n", "↵")
            same = i < len(ref.token_ids) and ref.token_ids[i] == tid
            spans.append(f"<span class='q6-tok' style=''>{text}</span>" if same else
                         f"<span class='q6-tok q6-diff' style='{DIFFERS};'>{text}</span>")
        first = first_difference(ref.token_ids, r.token_ids)
        verdict = ("identical to fp32" if first is None
                   else f"first differs at token {first + 1} of {len(r.token_ids)}")
        cards.append(
            f"<div class='q6-card' style='border:1px solid #ddd;border-radius:8px;padding:8px;"
            f"margin:4px 0'><b>{html.escape(r.key)}</b> <small>({html.escape(r.label)}; "
            f"{verdict})</small><div style='white-space:pre-wrap;margin-top:4px'>"
            f"{''.join(spans)}</div></div>")
    legend = (f"<small>Same prompt, greedy decoding. <span style='{DIFFERS}'>Highlighted</span> "
              "tokens differ from fp32 at the same position; after the first difference each text "
              "follows its own path, so later highlights are expected.</small>")
    return legend + "".join(cards)


def mode_cards_html(reports, noise=None, race=None, reference=None) -> str:
    """The smallest mode's weight bytes and decode tokens/s ÷ float32's. `race`: that mode raced
    against float32 (its range in the note); `reference`: the quiet figure, when busy."""
    base = next((r for r in reports or () if r.key == "fp32"), None)
    if base is None:
        return NO_MODES_CARDS
    others = [r for r in reports if r is not base]
    if not others:
        return cards_html([
            Card("fp32 decode tok/s", f"{base.decode_tokens_per_s:.1f}", "measured"),
            Card("fewer bytes", WAITING, "next mode")])
    small = min(others, key=lambda r: r.weight_bytes)
    raced = race is not None and race.key == small.key and race.robust is not None
    speed = small.decode_tokens_per_s / base.decode_tokens_per_s  # raced: the race's ratio
    said = ("noisy, busy machine" if noise is not None and noise.busy else
            "so far" if not supports_verdict(noise) else  # the roofline title's rule
            "faster" if speed >= FASTER else "not faster")
    bytes_card = Card(f"{small.key} bytes ÷ fp32", times(small.ratio_to_fp32),
                      f"measured: {human_bytes(small.weight_bytes)}")
    if raced and race.impossible:
        return cards_html([bytes_card, Card(f"{small.key} decode ÷ fp32", "—",
                                            "impossible: not shown")]) + (
            f"**not a possible result**: {race.impossible} This machine was disturbed; "
            "measured again: still impossible, so no speed ratio is shown.")
    note = (f"measured {small.decode_tokens_per_s:.1f} vs {base.decode_tokens_per_s:.1f} "
            f"tok/s: {said}")
    if raced:
        r = race.robust
        note = f"raced in pairs, range {r.low:.1f}–{r.high:.1f}× over {r.rounds} rounds; " + note
    quiet = reference_card(reference, f"{small.key} decode ÷ fp32", noise) if raced else None
    return cards_html([bytes_card, Card(f"{small.key} decode ÷ fp32", times(speed), note)]
                      + ([quiet] if quiet else []))


def results_table_md(reports) -> str:
    if not reports:
        return ""
    headers, rows = mode_table(reports)
    return md_table(" | ".join(headers), rows)


def weights_origin_md(source: str, dtype: str = "float32") -> str:
    """What precision the loaded weights had before any mode below, from `ModelInfo.source`."""
    if source.startswith("bundled GGUF"):
        return NOTES["weights_from_gguf"].format(dtype=dtype)
    return NOTES["weights_not_quantized"].format(source=source, dtype=dtype)


def closing_note_md(info, reports, bandwidth_gbs: float | None,
                    bf16_native: bool | None = None, noise=None) -> str:
    bandwidth = f", read bandwidth {bandwidth_gbs:.1f} GB/s measured" if bandwidth_gbs else ""
    head = f"### What this machine showed ({info.device}, {info.threads} threads{bandwidth})"
    if not reports:
        return head + "\n\nPress **Compare modes** to fill this in."
    by_key = {r.key: r for r in reports}
    base = by_key.get("fp32")
    lines = [head]
    if base and len(reports) > 1:  # the smallest mode against float32, as cards
        small = min(reports, key=lambda r: r.weight_bytes)
        lines.append(cards_html([
            Card(f"{small.key} weights", times(small.weight_bytes / base.weight_bytes) + " fp32",
                 human_bytes(small.weight_bytes)),
            Card(f"{small.key} decode",
                 times(small.decode_tokens_per_s / base.decode_tokens_per_s) + " fp32",
                 f"{small.decode_tokens_per_s:.1f} tok/s, measured"),
            Card(f"{small.key} agrees with fp32", f"{small.top1_decided:.0%}",
                 f"top-1 where fp32 was decided; {small.top1_agreement:.0%} of all")]))
    lines += ["- " + (f"**{r.key}**: {r.weight_bytes / 1e6:.0f} MB ({r.ratio_to_fp32:.2f}× fp32), "
                      f"decode **{r.decode_tokens_per_s:.1f} tokens/s**, prefill of "
                      f"{r.prompt_tokens} tokens {r.prefill_seconds * 1000:.0f} ms, top-1 "
                      f"agreement **{r.top1_agreement:.0%}** ({r.top1_decided:.0%} where fp32 was "
                      f"decided), KL {r.kl_mean:.4f} nats, perplexity {r.perplexity:.2f} · "
                      f"{r.kernel}")
              for r in reports]
    if noise is not None and noise.busy:
        lines.insert(1, busy_notice_html(noise))
        lines.append("\nNo verdict on which mode decodes fastest from this run.")
        return "\n".join(lines)
    if base and len(reports) > 1:
        fastest = max(reports, key=lambda r: r.decode_tokens_per_s)
        lines.append(f"\nFastest decode here: **{fastest.key}**, "
                     f"{fastest.decode_tokens_per_s / base.decode_tokens_per_s:.1f}× float32.")
        bf16 = by_key.get("bf16")
        if bf16 and bf16.decode_tokens_per_s < base.decode_tokens_per_s:  # why, as far as checked
            lines.append("bfloat16 holds half the bytes yet decoded slower than float32 here: " + (
                "this CPU has no native bfloat16 arithmetic (no avx512_bf16 or amx_bf16 among its "
                "flags), so the kernel, not memory, is the limit." if bf16_native is False else
                "its kernel, not memory, was the limit on this device."))  # None: not checked
    quiet = quiet_note(noise)
    lines.append(f"\n*{quiet[:1].upper() + quiet[1:]}.*" if quiet else
                 "\n*Timings on a shared machine are noisy; rerun to see the spread.*")
    return "\n".join(lines)


def head_treatment_md(treatments: dict[str, str]) -> str:
    return "**Embedding / output head:** " + " ".join(
        f"*{kind}*: {text}" for kind, text in treatments.items())
