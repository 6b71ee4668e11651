"""The segment base class: what every segment kind tells the compiler, decoder, planner and
explainer.

A compiled spec is a tuple of :class:`Segment` objects. Each one knows its byte layout (``width``:
fixed byte count, or None for variable width; ``self_delimiting``: a variable width whose end the
segment finds in the key itself, ``end_in``), its sort order (``order``), how to encode field
values (``encode``, the reference path, and ``emit``, the generated fast path), how to decode its
bytes back to fields (``decode``) and, for numeric segments of the time field, how a value interval
maps to a byte interval (``interval``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pipeline.rowkey.codegen import CodeGen
from pipeline.rowkey.errors import KeyDecodeError

__all__ = ["ByteInterval", "RandomLike", "Segment"]

#: ``(start, stop)`` of one segment's bytes; ``stop`` None means "to the end of the segment's space"
#: (every longer key with the same prefix).
ByteInterval = tuple[bytes, bytes | None]


class RandomLike(Protocol):
    """What ``random(n)`` segments need: ``random.Random`` satisfies it."""

    def randrange(self, stop: int, /) -> int: ...


class Segment:
    """One bracketed part of a rowkey spec.

    Class attributes describe the kind (code outside the package reads these, never a segment's
    class): ``invertible`` (decode recovers the fields),
    ``distributing`` (salt, hash prefix, mod bucket, random: values spread keys over the table),
    ``computable`` (the bytes follow from field values alone), ``time_ordered`` (the bytes order
    like the field's number, ascending or descending, so a time range maps to a byte interval),
    ``self_delimiting`` (variable width, but the bytes mark their own end, so no delimiter needs to
    follow: :meth:`end_in` finds it), ``numeric`` (its fields are numbers), ``time_bucket`` (a coarse
    bucket of a time field).
    """

    kind = "segment"
    invertible = False
    distributing = False
    computable = True
    time_ordered = False
    time_readable = False  # time_of() can read the field's time back from the bytes
    self_delimiting = False
    numeric = False  # its fields are numbers (a query's value for them is parsed as one)
    time_bucket = False  # a coarse bucket of a time field (several times share its bytes)

    __slots__ = ("fields", "paths", "pos", "source", "width")

    def __init__(self, source: str, fields: tuple[str, ...], width: int | None, pos: int) -> None:
        self.source = source
        self.fields = fields
        self.paths = tuple(tuple(f.split(".")) for f in fields)
        self.width = width
        self.pos = pos

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.source} width={self.width}>"

    # --- description -------------------------------------------------------------------------
    @property
    def order(self) -> str:
        """How the segment's bytes sort relative to its input values."""
        return "byte order"

    @property
    def layout(self) -> str:
        """One-line byte layout."""
        return self.source

    @property
    def min_width(self) -> int:
        """The fewest bytes the segment takes: its width when fixed, else what every value has."""
        return self.width or 0

    @property
    def time_descending(self) -> bool:
        """Whether the bytes order like the field's number descending (a ``time_ordered`` segment)."""
        return False

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        """How the compiled routing loop builds this segment's bytes (``planned_key`` in
        ``pipeline/core/routes/_routerun.c``), as the segment at ``index`` of its key followed by
        ``terminator`` (the delimiter the layout checks a variable text against, or None): ``(0,
        path, terminator)`` text, ``(1, data)`` a literal, ``(2, paths, buckets)`` a murmur3 salt over
        fields, ``(3, path, as_text)`` a reverse timestamp, ``(4, buckets)`` a leading murmur3 salt of
        the rest of the key; None when the loop cannot build it (the key's generated builder does).
        Each op gives the bytes :meth:`emit`'s code gives."""
        return None

    @property
    def value_count(self) -> int | None:
        """How many distinct byte values the segment can take when it is enumerable, else None."""
        return None

    # --- encoding -----------------------------------------------------------------------------
    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        """Reference encoder over raw field values (``values[field]``); raises EventFieldError."""
        raise NotImplementedError

    def emit(self, g: CodeGen) -> str:
        """Emit guards into ``g`` and return an expression for the segment's bytes."""
        raise NotImplementedError

    # --- decoding -----------------------------------------------------------------------------
    def decode(self, chunk: bytes) -> dict[str, Any]:
        """Fields recovered from this segment's bytes (empty when not invertible). Validates the
        bytes and raises KeyDecodeError when they cannot come from this segment."""
        return {}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        """Emit guards into ``g`` and return ``(field, expression)`` pairs for the fields stored in
        ``key[start:end]`` (the generated unverified decoder). A ``None`` field means that the
        expression is a whole ``{field: value}`` mapping. The default calls :meth:`decode`;
        segments whose bytes hold no field return ``[]`` (their bytes go unchecked)."""
        return [(None, f"{g.const(self.decode, 'dec')}({key}[{start}:{end}])")]

    def end_in(self, key: bytes, start: int) -> int:
        """Only for ``self_delimiting`` segments: the end (exclusive) of the segment's bytes that
        start at ``start`` in ``key``; raises KeyDecodeError when they have no valid end."""
        raise NotImplementedError

    def emit_end(self, g: CodeGen, key: str, start: str) -> str:
        """Only for ``self_delimiting`` segments: an expression for :meth:`end_in` that gives a
        negative number instead of raising (the generated decoder then takes the verified path)."""
        raise NotImplementedError

    def label(self, chunk: bytes) -> str:
        """Short label for a fan-out value, e.g. ``salt=3``."""
        return f"{self.kind}={chunk.hex()}"

    def enum_values(self) -> list[bytes]:
        """All byte values, ascending (only for enumerable segments)."""
        raise NotImplementedError

    def warnings(self) -> list[str]:
        """What the guides warn about this segment on its own (``design_warnings`` adds those of the
        whole key); none by default."""
        return []

    def split_prefixes(self, n_regions: int) -> list[bytes] | None:
        """When this segment leads a key: ``n_regions - 1`` ascending prefixes (``n_regions >= 2``) that
        cut the keyspace into regions of equal shares of its values, or None when it cannot: its
        values do not spread keys evenly (the split then needs a sample of keys), or ``n_regions``
        exceeds its values (a distributing segment)."""
        return None

    # --- time ranges --------------------------------------------------------------------------
    def interval(self, lo: int, hi: int) -> list[ByteInterval]:
        """Byte intervals covering every value ``v`` of the field with ``lo <= v < hi``."""
        raise NotImplementedError

    def interval_exact(self, lo: int, hi: int) -> bool:
        """True when :meth:`interval` holds no value outside ``[lo, hi)``."""
        return True

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        """``[lo, hi)`` of field values that encode to ``chunk`` (for time filters), None if
        unknown."""
        return None

    def bad(self, chunk: bytes, why: str) -> KeyDecodeError:
        return KeyDecodeError(f"segment {self.source}: {why} in {chunk!r}")


class NumberedSegment(Segment):
    """A segment whose bytes hold a bucket number and no field (mod, random and time buckets).
    Decoding validates the number (:meth:`bucket_of`) and recovers nothing; the generated decoder
    leaves the bytes unchecked; the fan-out label is ``<label_name>=<number>``."""

    label_name = "bucket"
    __slots__ = ()

    def bucket_of(self, chunk: bytes) -> int:
        """The bucket number in ``chunk``; raises KeyDecodeError when it cannot be one."""
        raise NotImplementedError

    def decode(self, chunk: bytes) -> dict[str, Any]:
        self.bucket_of(chunk)
        return {}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return []

    def label(self, chunk: bytes) -> str:
        return f"{self.label_name}={self.bucket_of(chunk)}"
