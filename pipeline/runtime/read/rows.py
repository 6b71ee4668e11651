"""Rows of a query: :class:`ReadRow`, and a route's row decoder generated once per route.

The decoder turns a run of scanned rows ``(key, {b"family:qualifier": cell})`` (a cell is
anything with a ``value`` attribute holding the stored bytes, such as
:class:`connectors.hbase.Cell`) into :class:`ReadRow` objects: key fields by the rowkey design's
decoder, cells by the route's column mapping (:mod:`pipeline.runtime.read.columns` gives the
encodings). A full scan is bound by this process's CPU, so the mapping is compiled into one plain
Python function per route: one dict lookup per mapped column, the encoding inlined, no call per
cell. Rows with cells the mapping does not name (unmapped columns, tally cells) take the general
path for those cells.

:func:`page_decoder` builds the same decoder from a route's JSON, for a worker process that decodes
pages away from the merging process: its rows are plain ``(key, fields, columns, range_label)``
tuples (they pickle in about half the time of :class:`ReadRow`; :func:`as_read_rows` rebuilds
them), and a row that does not decode raises the picklable
:class:`~pipeline.runtime.read.errors.RowDecodeError` naming its key. Given the query's filter,
it decodes only the rows the filter keeps and returns the others as ``(key,)``.

Errors: a cell that does not decode raises :class:`~pipeline.runtime.read.columns.CellDecodeError`
naming the column (the generated code catches ``ValueError`` and re-runs the row through the
general decoder, which names it); a key that does not decode raises the rowkey design's error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

from pipeline.core.routes.encodings import ENCODINGS, NAMESPACE
from pipeline.core.routes.router import compile_route
from pipeline.errors import HBaseIngestError
from pipeline.rowkey import RowKey
from pipeline.runtime.read.columns import CellDecodeError, compile_columns
from pipeline.runtime.read.errors import RowDecodeError
from pipeline.settings import RouteSpec

__all__ = ["PageQuery", "ReadRow", "RowDecoder", "ScannedRow", "as_read_rows", "compile_row_decoder",
           "is_decoded", "key_decoder", "page_decoder"]


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




def key_decoder(rowkey: RowKey, verify: bool) -> Callable[[bytes], dict[str, Any]]:
    """The reader's key decoder: the generated unverified one, or ``RowKey.decode`` when ``verify``."""
    return rowkey.decode if verify else rowkey.fast_decoder


_read_row = partial(tuple.__new__, ReadRow)


def as_read_rows(rows: Sequence[tuple[bytes, dict[str, Any], dict[str, Any], str]]) -> list[ReadRow]:
    """:class:`ReadRow` objects from :func:`page_decoder`'s plain tuples."""
    return list(map(_read_row, rows))  # C all the way: no Python frame per row


PageQuery = tuple[tuple[tuple[str, Any], ...], "tuple[int, int] | None", "str | None"]
"""A query's filter in hashable form, for a worker process: ``(sorted where items, time_range,
time_field)``, the arguments of ``RowKey.plan`` that give the query's ``matches``."""


def page_decoder(route_json: str, verify_keys: bool,
                 query: PageQuery | None = None) -> Callable[[Sequence[ScannedRow], str], list[Any]]:
    """``decode(rows, range_label)`` for ``RouteSpec.model_validate_json(route_json)``: rows as plain
    ``(key, fields, columns, range_label)`` tuples; an undecodable row raises
    :class:`RowDecodeError` naming it (see the module docstring). Pure: no I/O.

    With ``query``, only the rows whose key the query matches (``RowKey.plan(...).matches``, the
    reader's own filter) are decoded; every other row comes back as ``(key,)``, so the page keeps
    its length and its keys (paging goes on from the last one) and the caller drops those rows
    (:func:`is_decoded`) without having decoded, sent or unpickled them. As in this process, a key
    the filter cannot read does not match it."""
    route = RouteSpec.model_validate_json(route_json)
    rowkey = compile_route(route).rowkey
    decode_run = compile_row_decoder(route, key_decoder(rowkey, verify_keys), plain=True)

    def decode(rows: Sequence[ScannedRow], label: str) -> list[Any]:
        try:
            return decode_run(rows, label)
        except HBaseIngestError:
            for row in rows:  # find the row at fault, for the message
                try:
                    decode_run([row], label)
                except HBaseIngestError as exc:
                    raise RowDecodeError(row[0], str(exc)) from None
            raise

    if query is None:
        return decode
    where, time_range, time_field = query
    matches = rowkey.plan(dict(where), time_range, time_field=time_field).matches

    def decode_matching(rows: Sequence[ScannedRow], label: str) -> list[Any]:
        wanted = [matches(row[0]) for row in rows]
        decoded = iter(decode([row for row, w in zip(rows, wanted, strict=True) if w], label))
        return [next(decoded) if w else (row[0],) for row, w in zip(rows, wanted, strict=True)]

    return decode_matching


def is_decoded(row: tuple[Any, ...]) -> bool:
    """False for the ``(key,)`` stand-in of a row that :func:`page_decoder`'s filter dropped."""
    return len(row) > 1


def compile_row_decoder(route: RouteSpec, decode_key: Callable[[bytes], dict[str, Any]], *,
                        plain: bool = False) -> RowDecoder:
    """The generated ``decode_run(rows, range_label) -> list[ReadRow]`` of ``route`` (the module
    docstring gives the contract). ``decode_key`` decodes a key into its fields. ``plain`` makes
    plain tuples instead of :class:`ReadRow` (same fields, same order)."""
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

    names: dict[str, Any] = {**NAMESPACE, "_ReadRow": ReadRow, "_new": tuple.__new__, "_decode_key": decode_key,
                             "_rest": rest, "_undecodable": undecodable}
    body: list[str] = []
    for i, (raw, (column, encoding)) in enumerate(mapped.items()):
        names[f"_k{i}"] = raw
        names[f"_n{i}"] = column
        body += [f"c = get(_k{i})", "if c is not None:", "    left -= 1", "    v = c.value"]
        body += ["    " + line.format(name=f"_n{i}") for line in ENCODINGS[encoding].read_lines]
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
        ("        append((key, _decode_key(key), cols, label))" if plain else
         "        append(_new(_ReadRow, (key, _decode_key(key), cols, label)))"),  # ReadRow(...) minus a frame
        "    return out",
    ]
    source = "\n".join(src) + "\n"
    exec(compile(source, f"<row decoder of route {route.name!r}>", "exec"), names)
    fn: RowDecoder = names["decode_run"]
    fn.__doc__ = f"Decode rows of route {route.name!r} (generated).\n\n{source}"
    return fn
