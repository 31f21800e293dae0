"""The words a learner meets before a lesson explains them, defined once in plain language
(assets/glossary.md): the Glossary tab, each lesson's "Words in this lesson" box, and links from
a term's first use in a lesson's text to its entry. Also the notes views show as written."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"

# assets/glossary.md: an intro; "- <a id='gl-key'></a>**Name**: definition" entries, wrapped over
# indented lines; a closing comment of "key: form | form" lines, how lessons write a term where
# its name is not how ("KV heads / query heads") or too common a word to link ("Block")
_GLOSSARY = (ASSETS / "glossary.md").read_text(encoding="utf-8")
_ENTRY = re.compile(r"^- <a id='gl-(\w+)'></a>\*\*(.+?)\*\*: (.+?)(?=^- |^<!--|\Z)", re.M | re.S)
INTRO = _GLOSSARY[:_GLOSSARY.index("\n- ")].strip()
TERMS: dict[str, tuple[str, str]] = {
    key: (name, " ".join(text.split())) for key, name, text in _ENTRY.findall(_GLOSSARY)}
FORMS: dict[str, tuple[str, ...]] = {key: tuple(forms.split(" | ")) for key, forms in re.findall(
    r"^(\w+): (.+)$", _GLOSSARY[_GLOSSARY.rindex("<!--"):], re.M)}

# assets/notes.md: one paragraph under each "## key" heading
_NOTES = re.split(r"^## (\w+)\n", (ASSETS / "notes.md").read_text(encoding="utf-8"), flags=re.M)
NOTES: dict[str, str] = {
    key: " ".join(text.split()) for key, text in zip(_NOTES[1::2], _NOTES[2::2])}


def term_md(key: str, anchor: bool = False) -> str:
    name, definition = TERMS[key]
    mark = f"<a id='gl-{key}'></a>" if anchor else ""
    return f"- {mark}**{name}**: {definition}"


def glossary_md() -> str:
    return INTRO + "\n\n" + "\n".join(term_md(k, anchor=True) for k in TERMS)


def lesson_words_md(keys: list[str]) -> str:
    """A lesson's own terms (unknown keys are a mistake: KeyError)."""
    return "\n".join(term_md(k) for k in keys)


def term_forms(key: str) -> tuple[str, ...]:
    """How term `key` is written in lesson text: `FORMS`, or its name without the bracket,
    split at "/" and "," ("TTFT (time to first token)" -> "TTFT"; "O(1), O(n)" -> both)."""
    if key in FORMS:
        return FORMS[key]
    name = TERMS[key][0]
    base = name if name.startswith("O(") else re.sub(r"\s*\([^)]*\)", "", name)
    return tuple(p for p in re.split(r"\s+/\s+|,\s*", base) if p)


def term_href(key: str) -> str:
    return f"?lesson=glossary#gl-{key}"


# Left as written: fenced and inline code, links and images, HTML (an element with its text,
# a lone tag), headings, bare addresses.
_KEEP = re.compile(r"```.*?```|`[^`\n]*`|!?\[[^\]]*\]\([^)]*\)|<(\w+)\b[^>]*>.*?</\1\s*>|<[^>]+>"
                   r"|^#{1,6} [^\n]*|https?://\S+", re.DOTALL | re.MULTILINE)


def _form_pattern(written: str) -> str:
    """A form as a pattern: a plural s allowed; an acronym ("KL", "TTFT") in its case only."""
    body = re.escape(written) + ("(?:e?s)?" if written[-1].isalpha() else "")
    return f"(?-i:{body})" if written.isupper() else body


def link_terms(markdown: str, keys: Iterable[str] | None = None) -> str:
    """`markdown` with the first use of each term (`keys`: all by default) linked to its entry,
    titled with its definition; later uses, and code, links, HTML and headings, left as they are."""
    found = [(f, k) for k in (keys if keys is not None else TERMS) for f in term_forms(k)]
    # (pattern, key), longest first: "KV cache" wins over a shorter form starting there
    forms = [(_form_pattern(f), k) for f, k in sorted(found, key=lambda fk: -len(fk[0]))]
    pattern = re.compile(r"(?<![\w/-])(?:" + "|".join(p for p, _ in forms) + r")(?![\w/-])",
                         re.IGNORECASE)
    linked: set[str] = set()

    def link(m: re.Match) -> str:
        key = next(k for p, k in forms if re.fullmatch(p, m.group(0), re.IGNORECASE))
        if key in linked:
            return m.group(0)
        linked.add(key)
        name, definition = TERMS[key]
        title = f"{name}: {definition}".replace('"', "'")
        return f'[{m.group(0)}]({term_href(key)} "{title}")'

    out, at = [], 0
    for kept in _KEEP.finditer(markdown):
        out.append(pattern.sub(link, markdown[at:kept.start()]))
        out.append(kept.group(0))
        at = kept.end()
    out.append(pattern.sub(link, markdown[at:]))
    return "".join(out)
