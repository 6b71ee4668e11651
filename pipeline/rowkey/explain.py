"""Human-readable description of a design and its warnings (:func:`explain`, :func:`design_warnings`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.rowkey.errors import RowKeyError
from pipeline.rowkey.segments import Segment
from pipeline.rowkey.segments_num import Binary, Dec, ReverseTs, TimeBucket
from pipeline.rowkey.segments_text import Code, EscapedText, Literal, Pad, Text

if TYPE_CHECKING:
    from pipeline.rowkey.rowkey import RowKey

__all__ = ["design_warnings", "explain"]

#: The guides' advice: keep keys within 16 bytes; 100 bytes is the outer limit.
SHORT_KEY = 16
LONG_KEY = 100


def _monotonic(rk: RowKey, seg: Segment) -> bool:
    if isinstance(seg, TimeBucket | ReverseTs):
        return True
    return (
        isinstance(seg, Binary | Dec | Text | EscapedText | Pad)
        and rk.time_field is not None
        and seg.fields == (rk.time_field,)
    )


def design_warnings(rk: RowKey) -> list[str]:
    """Design problems the guides warn about, most serious first."""
    out: list[str] = []
    first = next((s for s in rk.segments if not isinstance(s, Literal)), None)
    if first is not None and _monotonic(rk, first):
        out.append(
            f"hotspot: the key starts with {first.source}, which moves monotonically with "
            "time, so all new rows land in one region; lead with a salt or hash of an "
            "entity field (e.g. [salt(host, 16)]) or with the entity itself"
        )
    for i in rk.layout.ambiguous:
        seg, nxt = rk.segments[i], rk.segments[i + 1]
        name = seg.fields[0] if seg.fields else "field"
        out.append(
            f"ambiguous boundary: {seg.source} is variable-length and directly followed by "
            f"{nxt.source}; prefix scans cannot tell 'host1' from 'host12' and keys may "
            f"collide; use rpad({name}, '\\x00', N) or a delimiter such as [_] after it"
        )
    fixed = rk.min_length
    length = rk.max_length
    shown = f"{length} bytes" if length is not None else f"at least {fixed} bytes"
    if fixed > LONG_KEY:
        out.append(f"long key: {shown}; the guides put the upper limit at {LONG_KEY} bytes")
    elif fixed > SHORT_KEY:
        out.append(
            f"long key: {shown}; the guides advise at most {SHORT_KEY} bytes (the key is "
            "stored with every cell)"
        )
    for seg in rk.segments:
        out.extend(seg.warnings())
    return out


def _sample(rk: RowKey, field: str) -> Any:
    for seg in rk.segments:
        if field in seg.fields:
            if isinstance(seg, Code):
                return next(iter(seg.codes))
            if isinstance(seg, Binary | Dec | ReverseTs | TimeBucket) or seg.kind == "mod":
                return 1_700_000_000_000 if field == rk.time_field else 1
    return "x"


def _describe_query(rk: RowKey, where: dict[str, Any], trange: tuple[int, int] | None) -> str:
    try:
        plan = rk.plan(where, trange)
    except RowKeyError as exc:
        return f"cannot plan: {str(exc).splitlines()[0]}"
    if plan.per_region:
        return "per-region scan with filter (too many prefixes to enumerate)"
    n = len(plan.ranges)
    kind = (
        "point get"
        if n == 1 and plan.ranges[0].label == "point"
        else ("single prefix scan" if n == 1 else f"fan-out over {n} ranges")
    )
    return f"{kind}{'' if plan.exact else ' + filter'}"


def explain(rk: RowKey) -> str:
    """The layout, widths, orders, query shapes and warnings of ``rk``."""
    lines = [f"rowkey {rk.spec}", "", "segments:"]
    rows = [("#", "segment", "bytes", "order", "layout")]
    for i, seg in enumerate(rk.segments):
        rows.append(
            (
                str(i),
                seg.source,
                str(seg.width) if seg.width is not None else "var",
                seg.order,
                seg.layout,
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        lines.append("  " + "  ".join(r[c].ljust(widths[c]) for c in range(4)) + "  " + r[4])
    length = rk.max_length
    lines.append("")
    lines.append(
        f"key length: {length} bytes"
        if length is not None
        else f"key length: variable, at least {rk.min_length} bytes"
    )
    lines.append(f"logical order: {rk.order()}")
    lines.append(f"time field: {rk.time_field or 'none'}")
    lines.append(
        f"decodable: {'yes' if rk.decodable else 'no'}; "
        f"point reads: {'yes' if rk.point_readable else 'no (random segment)'}"
    )
    if rk.fanout_size > 1:
        lines.append(f"fan-out: {rk.fanout_size} leading prefixes")
    lines.append("")
    lines.append("queries:")
    keyed = [
        f
        for s in rk.segments
        if not s.distributing and not isinstance(s, Literal)
        for f in s.fields
    ]
    order = list(dict.fromkeys(keyed))
    for k in range(len(order) + 1):
        where = {f: _sample(rk, f) for f in order[:k]}
        label = ", ".join(f"{f}=?" for f in where) or "(no fields)"
        lines.append(f"  {label}: {_describe_query(rk, where, None)}")
    if rk.time_field is not None:
        lines.append(
            f"  {rk.time_field} in [t0, t1): "
            f"{_describe_query(rk, {}, (1_700_000_000_000, 1_700_003_600_000))}"
        )
    warnings = design_warnings(rk)
    lines.append("")
    lines.append("warnings:" if warnings else "warnings: none")
    lines.extend(f"  - {w}" for w in warnings)
    return "\n".join(lines)
