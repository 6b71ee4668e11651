"""Decoders: a record's value and key, as bytes, become Python values. One decoder per format, chosen
per topic (``[[topics]] value_format`` / ``key_format``, :class:`~pipeline.settings.TopicSpec`).

This is the seam a new format plugs into: a value decoder is ``bytes -> object`` (an event is a
``dict`` with ``str`` keys; anything else is refused by the router as ``not_an_object``), and raises
:class:`~pipeline.errors.EventError` with reason ``undecodable`` and a message saying what is wrong
with the bytes. :data:`VALUE_DECODERS` and :data:`KEY_DECODERS` map a format's name to its decoder.

A decoder is pure (no I/O): a format whose bytes name something to fetch -- the Confluent wire
format's schema id -- gets it resolved before routing, by the runtime (an async step over a fetch's
records that fills a bounded cache of writer schemas), and its decoder reads that cache; an id the
cache lacks is ``undecodable`` like any other bytes that cannot be read.

JSON (:func:`loads`): orjson, except that integers outside ``[-2**63, 2**64 - 1]`` stay exact.
A Kafka Connect JSON envelope (an object with exactly the keys ``schema`` and ``payload``, what
Connect's JSON converter writes with ``schemas.enable=true``) is unwrapped to its payload, for
values and keys alike.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from pipeline.errors import EventError

__all__ = ["KEY_DECODERS", "VALUE_DECODERS", "Decoder", "dumps", "json_key", "json_value", "loads", "unwrap"]

Decoder = Callable[[bytes], Any]

# digits and "-" -> "0", any other byte -> " " (a C-level translate and substring search: 7x
# cheaper than a regular expression here). orjson keeps integers in [-2**63, 2**64 - 1] exact and
# reads any other as a float: a run of 20 digits (2**64 has 20), or a minus sign and 19 digits
# (-2**63 - 1 has 19), marks an integer that may lie outside that range. A run that is not such an
# integer (digits in a string, a long fraction) only costs a second, exact parse
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x20 for b in range(256))
_LONG_RUN = b"0" * 20
_ENVELOPE = {"schema", "payload"}


def loads(value: bytes) -> Any:
    """Parse JSON: orjson, except that integers outside [-2**63, 2**64 - 1] stay exact (orjson reads
    them as floats, which would silently change them). orjson validates first, so both parsers accept
    the same documents; only values with a run of 20+ digits, or of 19 after a minus sign, are parsed
    a second time, exactly. Raises ``orjson.JSONDecodeError``."""
    event = orjson.loads(value)
    if _LONG_RUN in value.translate(_DIGITS):
        event = json.loads(value)
    return event


def _json_default(value: Any) -> Any:
    """What orjson cannot write itself: a ``Decimal`` as an exact JSON number (its plain text; NaN and
    infinities as ``null``, as orjson writes such floats), ``bytes`` as a base64 string (both come from
    schema-registry formats)."""
    if isinstance(value, Decimal):
        return orjson.Fragment(format(value, "f")) if value.is_finite() else None
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _std_default(value: Any) -> Any:
    # reached only beside an integer beyond 64 bits, which only JSON events hold, and they hold no Decimal:
    # a float here keeps the value readable rather than exact
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """orjson's compact JSON, or the standard library's for an integer beyond 64 bits (same text).
    A ``Decimal`` is written as its exact number, ``bytes`` as base64 text (:func:`_json_default`)."""
    try:
        return orjson.dumps(value, default=_json_default)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=_std_default).encode()


def unwrap(value: Any) -> Any:
    """A Kafka Connect JSON envelope's payload; anything else as it is."""
    if value.__class__ is dict and len(value) == 2 and value.keys() == _ENVELOPE:
        return value["payload"]
    return value


def json_value(raw: bytes) -> Any:
    """A JSON value (Connect envelopes unwrapped); ``undecodable`` when it is not JSON."""
    try:
        return unwrap(loads(raw))
    except orjson.JSONDecodeError as exc:
        raise EventError("undecodable", f"value is not valid JSON: {exc}") from exc


def json_key(raw: bytes) -> Any:
    """A JSON key (Connect envelopes unwrapped); ``undecodable`` when it is not JSON."""
    try:
        return unwrap(loads(raw))
    except orjson.JSONDecodeError as exc:
        raise EventError("undecodable", f"key is not valid JSON: {exc}") from exc


def _text_key(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise EventError("undecodable", f"key is not UTF-8 text: {exc}") from exc


VALUE_DECODERS: dict[str, Decoder] = {"json": json_value}
KEY_DECODERS: dict[str, Decoder] = {"json": json_key, "text": _text_key, "bytes": bytes}
