"""Cell decoding for the reader: a route's column mapping compiled once into one plain function.

Encodings: the inverse of what the worker writes, from the one table of
:mod:`pipeline.core.routes.encodings` (``text`` -> ``str``, ``json`` -> the parsed value, ``long`` -> ``int``
from exactly 8 bytes).

A counter column (``RouteSpec.counter``) decodes as ``long`` in ``increment`` mode; in ``tally``
mode every cell of the counter's family is one event's amount and the decoded value is their sum.
Cells the route does not map come out as raw ``bytes`` under their ``family:qualifier`` name.
Decoded columns are keyed by ``family:qualifier`` (unambiguous even when two columns read the same
event field).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.core.routes.encodings import ENCODINGS, decode_long
from pipeline.errors import HBaseIngestError
from pipeline.settings import RouteSpec

__all__ = ["CellDecodeError", "ColumnDecoder", "compile_columns", "decode_long"]

ColumnDecoder = Callable[[dict[bytes, bytes]], dict[str, Any]]


class CellDecodeError(HBaseIngestError):
    """A stored cell that the route's column mapping cannot decode (names the column)."""

    def __init__(self, column: str, encoding: str, detail: str) -> None:
        super().__init__(f"column {column!r} ({encoding}): {detail}")
        self.column = column
        self.encoding = encoding


_DECODERS: dict[str, Callable[[bytes], Any]] = {name: e.decode for name, e in ENCODINGS.items()}


def _tally_amount(value: bytes) -> int:
    return decode_long(value) if len(value) == 8 else int(value)


def compile_columns(route: RouteSpec) -> ColumnDecoder:
    """The decoder of ``route``'s cells: ``{b"fam:qual": bytes}`` -> ``{"fam:qual": value}``.

    Raises :class:`CellDecodeError` naming the column when a mapped cell does not decode.
    """
    plan: dict[bytes, tuple[str, str, Callable[[bytes], Any]]] = {}
    for column, spec in route.columns.items():
        plan[column.encode()] = (column, spec.encoding, _DECODERS[spec.encoding])
    tally_family: bytes | None = None
    tally_name = ""
    if route.counter is not None:
        if route.counter.mode == "tally":
            tally_family = route.counter.column.split(":", 1)[0].encode() + b":"
            tally_name = route.counter.column
        else:
            plan[route.counter.column.encode()] = (route.counter.column, "long", decode_long)

    plan_get = plan.get  # one bound method for every cell (this runs once per cell read)

    def decode(cells: dict[bytes, bytes]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        total: int | None = None
        for raw, value in cells.items():
            entry = plan_get(raw)
            if entry is not None:
                try:
                    out[entry[0]] = entry[2](value)
                except ValueError as exc:  # UnicodeDecodeError and orjson.JSONDecodeError included
                    raise CellDecodeError(entry[0], entry[1], str(exc)) from exc
            elif tally_family is not None and raw.startswith(tally_family):
                try:
                    total = (total or 0) + _tally_amount(value)
                except ValueError as exc:
                    name = raw.decode("utf-8", "replace")
                    raise CellDecodeError(name, "tally", str(exc)) from exc
            else:
                out[raw.decode("utf-8", "replace")] = value
        if total is not None:
            out[tally_name] = total
        return out

    return decode
