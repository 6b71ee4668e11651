"""Rows of a query: :class:`ReadRow`, and a route's row decoder generated once per route.

The decoder turns a run of scanned rows ``(key, {b"family:qualifier": cell})`` (a cell is
anything with a ``value`` attribute holding the stored bytes, such as
:class:`connectors.hbase.Cell`) into :class:`ReadRow` objects: key fields by the rowkey design's
decoder, cells by the route's column mapping (:mod:`pipeline.runtime.reader_columns` gives the
encodings). A full scan is bound by this process's CPU, so the mapping is compiled into one plain
Python function per route: one dict lookup per mapped column, the encoding inlined, no call per
cell. Rows with cells the mapping does not name (unmapped columns, tally cells) take the general
path for those cells.

Errors: a cell that does not decode raises :class:`~pipeline.runtime.reader_columns.CellDecodeError`
naming the column (the generated code catches ``ValueError`` and re-runs the row through the
general decoder, which names it); a key that does not decode raises the rowkey design's error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from pipeline.runtime.reader_columns import CellDecodeError, compile_columns
from pipeline.settings import RouteSpec

__all__ = ["ReadRow", "RowDecoder", "ScannedRow", "compile_row_decoder"]


ScannedRow = tuple[bytes, dict[bytes, Any]]
"""``(key, {b"family:qualifier": cell})``; a cell has ``value: bytes``."""

RowDecoder = Callable[[Sequence[ScannedRow], str], list["ReadRow"]]


class ReadRow(NamedTuple):
    """One row of a query: its key, the key's fields decoded by the rowkey design, its cells
    decoded by the route's column mapping (keyed ``family:qualifier``, mapped columns first in the
    mapping's order, then any others in the row's column order) and the label of the range it came
    from."""

    key: bytes
    fields: dict[str, Any]
    columns: dict[str, Any]
    range_label: str


_INLINE = {
    # the statements that decode the bytes ``v`` of one mapped cell into ``cols[<name>]``
    "text": ["cols[{name}] = v.decode()"],
    "json": ["cols[{name}] = _loads(v)"],
    "long": ["if len(v) != 8:", "    raise ValueError", "cols[{name}] = _from_bytes(v, 'big', signed=True)"],
}


def compile_row_decoder(route: RouteSpec, decode_key: Callable[[bytes], dict[str, Any]]) -> RowDecoder:
    """The generated ``decode_run(rows, range_label) -> list[ReadRow]`` of ``route`` (the module
    docstring gives the contract). ``decode_key`` decodes a key into its fields."""
    mapped: dict[bytes, tuple[str, str]] = {
        column.encode(): (column, spec.encoding) for column, spec in route.columns.items()}
    if route.counter is not None and route.counter.mode == "increment":
        mapped[route.counter.column.encode()] = (route.counter.column, "long")
    general = compile_columns(route)

    def rest(cells: dict[bytes, Any], cols: dict[str, Any]) -> None:
        """The cells the mapping does not name (raw bytes, or a tally sum), added to ``cols``."""
        others = {raw: cell.value for raw, cell in cells.items() if raw not in mapped}
        cols.update(general(others))

    def undecodable(cells: dict[bytes, Any], exc: ValueError) -> Exception:
        try:
            general({raw: cell.value for raw, cell in cells.items()})  # names the column at fault
        except CellDecodeError as named:
            return named
        return CellDecodeError("?", "?", str(exc))

    names: dict[str, Any] = {"_ReadRow": ReadRow, "_new": tuple.__new__, "_decode_key": decode_key, "_rest": rest,
                             "_undecodable": undecodable, "_loads": orjson.loads,
                             "_from_bytes": int.from_bytes}
    body: list[str] = []
    for i, (raw, (column, encoding)) in enumerate(mapped.items()):
        names[f"_k{i}"] = raw
        names[f"_n{i}"] = column
        body += [f"c = get(_k{i})", "if c is not None:", "    left -= 1", "    v = c.value"]
        body += ["    " + line.format(name=f"_n{i}") for line in _INLINE[encoding]]
    if not body:  # nothing mapped (a tally counter alone): every cell takes the general path
        body = ["pass"]
    src = [
        "def decode_run(rows, label):",
        "    out = []",
        "    append = out.append",
        "    for key, cells in rows:",
        "        cols = {}",
        "        get = cells.get",
        "        left = len(cells)",
        "        try:",
        *("            " + line for line in body),
        "        except ValueError as exc:",
        "            raise _undecodable(cells, exc) from exc",
        "        if left:",
        "            _rest(cells, cols)",
        "        append(_new(_ReadRow, (key, _decode_key(key), cols, label)))",  # ReadRow(...) minus a frame
        "    return out",
    ]
    source = "\n".join(src) + "\n"
    exec(compile(source, f"<row decoder of route {route.name!r}>", "exec"), names)
    fn: RowDecoder = names["decode_run"]
    fn.__doc__ = f"Decode rows of route {route.name!r} (generated).\n\n{source}"
    return fn
