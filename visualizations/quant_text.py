"""Lesson 6 in words: the headline cards, every measured number per precision mode, where the
weights came from and what this run showed."""
from __future__ import annotations

from .cards import WAITING, Card, cards_html, human_bytes, times
from .glossary import NOTES
from .noise_view import busy_notice_html, quiet_note, reference_card, supports_verdict
from .quant_charts import mode_table
from .roofline_charts import FASTER

NO_MODES_CARDS = NOTES["no_modes_cards"]


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
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


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
