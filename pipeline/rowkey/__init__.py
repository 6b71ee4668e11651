"""The rowkey design engine: one declarative key-layout spec drives the writer (``build``), the
decoder (``decode``), the scan planner (``plan``, ``sort_key``, ``fanout``), the pre-splitter
(:func:`~pipeline.rowkey.splits.split_points`) and the design review
(:func:`~pipeline.rowkey.explain.explain`, :func:`~pipeline.rowkey.explain.design_warnings`). Pure logic, no I/O.

A spec is a sequence of bracketed segments, e.g.::

    [salt(user_id, 16)][user_id][_][long(ts)]
    [md5(user_id, 4)][user_id][order_id]         also [md5(user_id).subStr(0, 4)]...
    [hostname][_][log_event][reverse_ts(timestamp)]   also [Long.MAX_VALUE - timestamp]
    [mod(timestamp, 16)][long(timestamp)][hostname]   also [timestamp % 16]
    [time_bucket(timestamp, 15m)][host][_][metric]
    [rpad(column1, 'x', 20)][column2]   [column1][_][column2]   ['#']
    [code(platform, {Taobao: tb, JD: jd}, default=ot)][user_id]
    [user_id][_][order_id][random(100)]
    [text(buyer_id, escaped)][long(order_id)]    any text, 0x00 escaped, self-terminated

Field names may be dotted paths into nested events (``user.id``), contain hyphens (``log-event``) or
spaces (``seller id``). Every segment kind documents its byte layout and sort order in its module:
``segments_text`` (text, escaped text, literal, rpad/lpad, reverse, code), ``segments_num``
(long/int and their ordered/desc variants, dec, reverse_ts, time_bucket) and ``segments_dist``
(salt, md5, mod, random).
"""

from __future__ import annotations

from pipeline.rowkey.errors import (
    EventFieldError,
    KeyDecodeError,
    PlanError,
    RowKeyError,
    SpecSyntaxError,
)
from pipeline.rowkey.escape import format_key, parse_key
from pipeline.rowkey.planner import KeyRange, ScanPlan
from pipeline.rowkey.rowkey import RowKey, compile_rowkey
from pipeline.rowkey.segments import RandomLike, Segment

__all__ = [
    "EventFieldError",
    "KeyDecodeError",
    "KeyRange",
    "PlanError",
    "RandomLike",
    "RowKey",
    "RowKeyError",
    "ScanPlan",
    "Segment",
    "SpecSyntaxError",
    "compile_rowkey",
    "format_key",
    "parse_key",
]
