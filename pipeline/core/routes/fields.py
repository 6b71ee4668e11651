"""Reading a field from a decoded event, and a column's encoding of it (the encodings themselves are
the table of :mod:`pipeline.core.routes.encodings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.core.routes.encodings import ENCODINGS, encode_long, text
from pipeline.settings import ColumnSpec

__all__ = ["MISSING", "encode_long", "encoder", "getter", "text"]

#: what :func:`getter` returns for an absent field
MISSING = object()


def getter(path: str) -> Callable[[Mapping[str, Any]], Any]:
    """A function reading a dotted path (``a.b.c``) from a decoded event; returns a sentinel when absent."""
    parts = tuple(path.split("."))
    if len(parts) == 1:
        key = parts[0]
        return lambda event: event.get(key, MISSING)

    def get(event: Mapping[str, Any]) -> Any:
        cur: Any = event
        for p in parts:
            if not isinstance(cur, Mapping):
                return MISSING
            cur = cur.get(p, MISSING)
            if cur is MISSING:
                return MISSING
        return cur
    return get


def encoder(spec: ColumnSpec) -> Callable[[Any], bytes]:
    """The column's encoding (:data:`~pipeline.core.routes.encodings.ENCODINGS`) as a function of the field's
    value (:class:`~pipeline.errors.EventError` for a value the encoding cannot hold)."""
    return ENCODINGS[spec.encoding].encoder(spec.field)


