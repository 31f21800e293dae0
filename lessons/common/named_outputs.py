"""Handlers return small named records (dataclasses or NamedTuples); Gradio receives
`{component: value}` dicts. A panel maps field names to its components with
`showing(components, fn)`; a field left None, or with no component, is not sent, so its
component keeps what it shows. A component named for no field is a mistake, and raises.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Frame:
...     progress: str
...     table: str | None = None
>>> keyed({"progress": "P", "table": "T"}, Frame("50%"))
{'P': '50%'}
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import fields
from typing import Any


def keyed(components: Mapping[str, Hashable], record) -> dict[Hashable, Any]:
    """`{component: value}` for every field of `record` shown by a component and not None."""
    names = record._fields if isinstance(record, tuple) else [f.name for f in fields(record)]
    if unknown := components.keys() - set(names):
        raise KeyError(f"{type(record).__name__} has no field {', '.join(sorted(unknown))}")
    return {components[n]: getattr(record, n) for n in names
            if n in components and getattr(record, n) is not None}


def showing(components: Mapping[str, Hashable], fn: Callable) -> Callable[..., Iterator[dict]]:
    """A handler returning or yielding records, as dicts keyed by component (list
    `components.values()` as the event's outputs)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        result = fn(*args, **kwargs)
        for record in result if hasattr(result, "__next__") else [result]:
            yield keyed(components, record)
    return run
