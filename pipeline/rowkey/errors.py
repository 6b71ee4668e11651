"""Errors raised by the rowkey design engine.

::

    HBaseIngestError                (pipeline.errors)
    └── RowKeyError
        ├── SpecSyntaxError         the spec does not parse or is impossible (.spec, .position)
        ├── EventFieldError         an event cannot feed a key (.field, .value, .reason)
        ├── KeyDecodeError          bytes that the spec cannot decode
        └── PlanError               a query or pre-split the design cannot answer as key ranges

``EventFieldError.reason`` is one of :data:`REASONS`; the worker copies it into the dead-letter
headers.
"""

from __future__ import annotations

from typing import Any

from pipeline.errors import HBaseIngestError

__all__ = [
    "REASONS",
    "EventFieldError",
    "KeyDecodeError",
    "PlanError",
    "RowKeyError",
    "SpecSyntaxError",
]

#: Machine-readable reasons carried by :class:`EventFieldError`.
REASONS = frozenset(
    {
        "missing_field",  # absent, null, or a path through a non-mapping
        "bad_type",  # e.g. a string where a long is required; bools are never integers
        "too_long",  # does not fit a fixed width (rpad/lpad/dec/time_bucket text)
        "unmapped_code",  # code(...) without a default and a value outside the dictionary
        "out_of_range",  # a number outside the encoding's domain (e.g. negative for dec)
        "contains_delimiter",  # variable text holding the first byte of the delimiter after it
        "empty_key",  # every part of the key is empty text: HBase refuses an empty row key
    }
)


class RowKeyError(HBaseIngestError):
    """Root of the rowkey engine's errors."""


class SpecSyntaxError(RowKeyError):
    """A rowkey spec that does not parse or describes an impossible layout.

    ``position`` is the 0-based character offset in ``spec``; the message shows the spec with a
    caret under that position.
    """

    def __init__(self, message: str, spec: str, position: int) -> None:
        self.spec = spec
        self.position = max(0, min(position, len(spec)))
        self.detail = message
        caret = " " * self.position + "^"
        super().__init__(f"{message} at position {self.position}\n  {spec}\n  {caret}")


class EventFieldError(RowKeyError):
    """An event whose field cannot feed the key.

    ``field`` is the logical field name (a dotted path for nested fields), ``value`` the offending
    value (None when missing) and ``reason`` one of :data:`REASONS`.
    """

    def __init__(self, field: str, value: Any, reason: str, detail: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"field {field!r}: {detail} (value {shown}, reason {reason})")


class KeyDecodeError(RowKeyError):
    """Key bytes that the spec cannot decode (wrong length, bad digits, ambiguous boundaries...)."""


class PlanError(RowKeyError):
    """A query or split request that the key design cannot answer; the message says what would."""
