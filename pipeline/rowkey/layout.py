"""Where each segment's bytes lie in a key: static boundary analysis and locating.

A fixed-width segment ends ``width`` bytes after it starts. A self-delimiting segment (escaped text)
ends where its own bytes say (:meth:`~pipeline.rowkey.segments.Segment.end_in`), whatever follows
it; a literal after it is no delimiter of it. Any other variable-width segment ends at the first
byte of the literal that follows it (its value may not contain that byte: builds reject it with
``contains_delimiter``), or, when every later segment is fixed-width, that many bytes before the
end of the key. Otherwise its end is unknown; fixed-width segments after it can still be located
from the end of the key.
"""

from __future__ import annotations

from pipeline.rowkey.errors import KeyDecodeError
from pipeline.rowkey.segments import Segment
from pipeline.rowkey.segments_text import Literal

__all__ = ["Layout", "Span"]

Span = tuple[int, int]


class Layout:
    """Boundary facts about a segment tuple."""

    __slots__ = ("ambiguous", "decodable", "n", "segments", "tail_width", "terminator")

    def __init__(self, segments: tuple[Segment, ...]) -> None:
        self.segments = segments
        self.n = n = len(segments)
        #: first byte of the literal after a variable-width segment that is not self-delimiting,
        #: else None
        self.terminator: list[bytes | None] = [None] * n
        #: total width of the segments after i when all are fixed, else None
        self.tail_width: list[int | None] = [None] * n
        acc: int | None = 0
        for i in range(n - 1, -1, -1):
            self.tail_width[i] = acc
            w = segments[i].width
            acc = None if acc is None or w is None else acc + w
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < n else None
            if seg.width is None and not seg.self_delimiting and isinstance(nxt, Literal):
                self.terminator[i] = nxt.data[:1]
        #: variable-width segments, not self-delimiting, followed directly by a non-literal segment
        #: (prefix queries on them cannot tell "host1" from "host12")
        self.ambiguous = [
            i
            for i, seg in enumerate(segments)
            if seg.width is None
            and not seg.self_delimiting
            and i + 1 < n
            and self.terminator[i] is None
        ]
        self.decodable = all(self._found(i) for i in range(n))

    def _found(self, i: int) -> bool:
        """True when the end of segment ``i`` can be found from its start in any key."""
        seg = self.segments[i]
        return (
            seg.width is not None
            or seg.self_delimiting
            or self.terminator[i] is not None
            or self.tail_width[i] is not None
        )

    def locate(self, key: bytes, strict: bool = True) -> list[Span | None]:
        """Spans ``(start, end)`` of every segment in ``key``; None where the boundary is unknown.

        Raises KeyDecodeError when ``key`` cannot have this layout (too short, a missing delimiter,
        a malformed self-delimiting segment, trailing bytes). With ``strict`` an unknown boundary is
        an error too.
        """
        spans: list[Span | None] = [None] * self.n
        pos, size = 0, len(key)
        stopped = -1
        for i, seg in enumerate(self.segments):
            w = seg.width
            if w is not None:
                end = pos + w
            elif seg.self_delimiting:
                end = seg.end_in(key, pos)
            elif (term := self.terminator[i]) is not None:
                end = key.find(term, pos)
                if end < 0:
                    raise KeyDecodeError(f"no {term!r} delimiter after {seg.source} at byte {pos}")
            elif (tail := self.tail_width[i]) is not None:
                end = size - tail
            else:
                stopped = i
                break
            if end > size or end < pos:
                raise KeyDecodeError(f"key of {size} bytes is too short for {seg.source}")
            spans[i] = (pos, end)
            pos = end
        if stopped < 0:
            if pos != size:
                raise KeyDecodeError(f"{size - pos} unexpected trailing bytes after byte {pos}")
            return spans
        if strict:
            raise KeyDecodeError(
                f"cannot decode: {self.segments[stopped].source} is variable-length and not "
                "followed by a delimiter, so its end is unknown"
            )
        end = size
        for i in range(self.n - 1, stopped, -1):
            w = self.segments[i].width
            if w is None or end - w < pos:
                break
            spans[i] = (end - w, end)
            end -= w
        return spans

    def locatable(self) -> list[bool]:
        """Which segments :meth:`locate` can always find (from the left or from the right)."""
        out = [False] * self.n
        for i in range(self.n):
            if not self._found(i):
                for j in range(self.n - 1, i, -1):
                    if self.segments[j].width is None:
                        break
                    out[j] = True
                return out
            out[i] = True
        return out
