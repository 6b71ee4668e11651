"""Generating a spec's hot functions: ``build(event)`` and the unverified ``decode(key)``, as Python
source specialised for the segment tuple (:class:`~pipeline.rowkey.codegen.CodeGen` compiles it).
Both fall back to the reference implementation on any input a guard refuses, so they never differ
from it: they only skip the interpretation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.rowkey.codegen import BuildFn, CodeGen, DecodeFn
from pipeline.rowkey.layout import Layout
from pipeline.rowkey.segments import RandomLike, Segment
from pipeline.rowkey.segments_dist import KeySalt

__all__ = ["generate_builder", "generate_decoder"]


def generate_builder(segments: tuple[Segment, ...], layout: Layout, reference: Callable[..., bytes],
                     rng: RandomLike, spec: str) -> BuildFn:
    """The generated ``build(event)`` of a spec: each segment's emitted code, terminator guards, the
    salt over the rest; any guard that fails falls back to ``reference`` (which raises the error)."""
    g = CodeGen()
    exprs: list[str] = []
    for i, seg in enumerate(segments):
        if isinstance(seg, KeySalt):
            continue
        expr = seg.emit(g)
        term = layout.terminator[i]
        if term is not None:
            if not expr.isidentifier():
                x = g.tmp()
                g.stmt(f"{x} = {expr}")
                expr = x
            g.guard(f"{g.const(term, 'term')} not in {expr}")
        exprs.append(expr)
    joined = " + ".join(exprs) if len(exprs) <= 4 else f"b''.join(({', '.join(exprs)},))"
    first = segments[0]
    if isinstance(first, KeySalt):
        g.stmt(f"rest = {joined if exprs else repr(b'')}")
        joined = f"{first.emit_over(g, 'rest')} + rest"
    elif all(seg.width is None for seg in segments):  # only then can the key be empty
        g.stmt(f"key = {joined}")
        g.guard("key")  # the reference path raises the empty_key error
        joined = "key"
    return g.finish(joined, reference, rng, spec)


def generate_decoder(segments: tuple[Segment, ...], layout: Layout, max_length: int | None,
                     reference: Callable[..., dict[str, Any]], spec: str) -> DecodeFn:
    """The generated unverified ``decode(key)``: spans found as :meth:`Layout.locate` finds them (a
    self-delimiting segment's end by its ``emit_end``), each segment's emitted decoding; a key that
    fails a guard goes to ``reference`` (the verified decode)."""
    if not layout.decodable:
        return reference  # raises the "cannot decode" KeyDecodeError
    g = CodeGen(fallback="_slow(key)")

    def at(base: str | None, off: int) -> str:
        if base is None:
            return str(off)
        return base if off == 0 else f"{base} + {off}"

    fixed = max_length
    if fixed is not None:
        g.guard(f"len(key) == {fixed}")
    # spans exactly as Layout.locate finds them: a position is a variable plus a constant
    base: str | None = None
    off = 0
    to_end = False
    spans: list[tuple[str, str]] = []
    for i, seg in enumerate(segments):
        start = at(base, off)
        if seg.width is not None:
            off += seg.width
        elif seg.self_delimiting:
            base, off = g.tmp(), 0
            g.stmt(f"{base} = {seg.emit_end(g, 'key', start)}")
            g.guard(f"{base} >= 0")
        elif (term := layout.terminator[i]) is not None:
            base, off = g.tmp(), 0
            g.stmt(f"{base} = key.find({g.const(term, 'term')}, {start})")
            g.guard(f"{base} >= 0")
        else:  # the fixed-width tail_width[i] bytes after it end the key
            tail = layout.tail_width[i]
            base, off, to_end = g.tmp(), 0, True
            g.stmt(f"{base} = len(key) - {tail}" if tail else f"{base} = len(key)")
            g.guard(f"{base} >= {start}")
        spans.append((start, at(base, off)))
    if fixed is None and not to_end:
        g.guard(f"{at(base, off)} == len(key)")
    items: list[tuple[str | None, str]] = []
    done: set[str] = set()
    for seg, (start, end) in zip(segments, spans, strict=True):
        if seg.fields and all(f in done for f in seg.fields):
            continue  # a copy of fields decoded already (equal in any valid key)
        pairs = seg.emit_decode(g, "key", start, end)
        done.update(f for f, _ in pairs if f is not None)
        items.extend(pairs)
    body = ", ".join(f"{f!r}: {x}" if f is not None else f"**{x}" for f, x in items)
    return g.finish_decoder(f"{{{body}}}", reference, spec)
