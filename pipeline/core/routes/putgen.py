"""Generation of one plain put route's fast form: ``mutation(event, origin) -> Mutation | None``.

A route that writes columns (not a counter, no deletes, no null rules, no record metadata) gets a
straight-line function, compiled once, that builds its key, checks its timestamp, reads and encodes
each column and checks the limits with no per-column closures, no loop and no type dispatch chain.
For ``bench_worker``'s design::

    def mutation(event, origin):
        try:
            row = _build(event)
            n = len(row)
            if not (n <= 32767):
                return None
            ts = event['timestamp']
            if not (ts.__class__ is int and 0 <= ts <= 9223372036854775807):
                return None
            v0 = event['value']
            if v0 is None:
                return None
            c = v0.__class__
            if c is str:
                r0 = v0.encode()
            elif c is int or c is float:
                r0 = str(v0).encode()
            else:
                r0 = _text(v0)
            n0 = len(r0)
            if not (n0 <= 10485760):
                return None
            ...
            return _Mutation(_table, row, _PUT, {b'l:v': r0, ...}, ts, origin, 0, n + 50 + n0 + ...)
        except Exception:
            return None

Contract: for any event, the function returns None, or the one mutation that the route's reference
(:meth:`pipeline.core.routes.reference.RouteReference.apply`) gives for that event (the same row, cells in the
same order, the same timestamp and size). It never raises: None means "not proven here", and the
caller asks the reference, which gives the result, nothing (a NULL key skipped, no cell left) or the
refusal with its reason. Guards only decide between a mutation and None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.core.model import Mutation, MutationKind, Origin
from pipeline.core.routes.encodings import ENCODINGS, LONG_MAX, NAMESPACE
from pipeline.settings import ColumnSpec

__all__ = ["MutationFn", "generate_put"]

#: a route's fast form: its one mutation for an event, or None when the reference must decide
MutationFn = Callable[[Mapping[str, Any], Origin], Mutation | None]


#: what an absent parent of an optional field reads as (never written to)
_NONE: Mapping[str, Any] = {}


def _lookup(path: str) -> str:
    """``event['a']['b']`` for ``a.b``: a missing key or a non-object on the way raises (-> None)."""
    return "event" + "".join(f"[{part!r}]" for part in path.split("."))


def generate_put(*, route: str, table: str, build: Callable[..., bytes], columns: Mapping[str, ColumnSpec],
                 timestamp_field: str | None, max_key_bytes: int, max_cell_bytes: int) -> MutationFn:
    """Compile the fast form of one plain put route (see the module's docstring). ``build`` is the
    route's rowkey builder; ``columns`` in the route's order; each column's encoding is inlined from
    :data:`~pipeline.core.routes.encodings.ENCODINGS`."""
    ns: dict[str, Any] = {**NAMESPACE, "_build": build, "_Mutation": Mutation, "_PUT": MutationKind.PUT,
                          "_table": table, "_NONE": _NONE}
    slow_call = "return None"
    lines = ["row = _build(event)", "n = len(row)", f"if not (n <= {max_key_bytes}):", f"    {slow_call}"]
    if timestamp_field is not None:
        lines += [f"ts = {_lookup(timestamp_field)}", f"if not (ts.__class__ is int and 0 <= ts <= {LONG_MAX}):",
                  f"    {slow_call}"]
    else:
        lines.append("ts = None")
    fixed = 16  # the size estimate of Mutation.size: row + 16, and per cell name + value + 8
    cells: list[tuple[bytes, str, str]] = []  # name, value variable, length variable
    all_required = all(spec.required for spec in columns.values())
    if not all_required:
        lines.append("cells = {}")
        lines.append("size = 0")
    for i, (column, spec) in enumerate(columns.items()):
        name = column.encode()
        v, r, n = f"v{i}", f"r{i}", f"n{i}"
        body: list[str] = []
        body += [line.format(v=v, r=r, slow=slow_call) for line in ENCODINGS[spec.encoding].write_lines]
        body += [f"{n} = len({r})", f"if not ({n} <= {max_cell_bytes}):", f"    {slow_call}"]
        if all_required:  # one dict literal at the end, its size partly constant
            lines += [f"{v} = {_lookup(spec.field)}", f"if {v} is None:", f"    {slow_call}", *body]
            cells.append((name, r, n))
            fixed += len(name) + 8
            continue
        body += [f"cells[{name!r}] = {r}", f"size += {len(name) + 8} + {n}"]
        if spec.required:
            lines += [f"{v} = {_lookup(spec.field)}", f"if {v} is None:", f"    {slow_call}", *body]
        else:
            # absent or null, or a parent absent: no cell; any other miss on the way (a parent that is
            # not an object: .get raises) -> None
            parts = spec.field.split(".")
            lookup = "event" + "".join(f".get({p!r}, _NONE)" for p in parts[:-1]) + f".get({parts[-1]!r})"
            lines += [f"{v} = {lookup}", f"if {v} is not None:",
                      *(f"    {line}" for line in body)]
    if all_required:
        literal = "{" + ", ".join(f"{name!r}: {r}" for name, r, _ in cells) + "}"
        size = " + ".join(["n", str(fixed), *(n for _, _, n in cells)])
    else:
        literal, size = "cells", f"n + {fixed} + size"
        lines += ["if not cells:", f"    {slow_call}"]  # no cell: no put (the reference gives nothing)
    lines.append(f"return _Mutation(_table, row, _PUT, {literal}, ts, origin, 0, {size})")
    src = ["def mutation(event, origin):", "    try:", *(f"        {line}" for line in lines),
           "    except Exception:", "        return None"]
    source = "\n".join(src) + "\n"
    exec(compile(source, f"<route {route}>", "exec"), ns)
    fn: MutationFn = ns["mutation"]
    fn.__doc__ = f"The put of route {route!r} from one event (generated).\n\n{source}"
    return fn
