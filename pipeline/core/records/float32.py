"""32-bit floats as people read them: the shortest decimal that reads back as the same float32.

A 32-bit float (Avro ``float``, Protobuf ``float``) reaches Python as the float64 of its exact binary
value: Avro's ``0.1f`` is ``0.10000000149011612``. :func:`shortest_float32` gives instead the float64
of the shortest decimal text that rounds to the same float32 (``0.1``), as Java's ``Float.toString``
(JDK 19 and later) and Flink show it; among shortest decimals that do, the one nearest the exact
value (a tie: the even last digit). NaN, the infinities and zeros are returned as they are. Pure:
at most nine precisions, three candidates each (a float32's shortest text has at most nine digits).
"""

from __future__ import annotations

import struct
from decimal import Decimal

__all__ = ["shortest_float32"]

_F32 = struct.Struct("<f")


def _as_float32(x: float) -> float:
    """``x`` rounded to the nearest float32 (OverflowError beyond its range)."""
    return float(_F32.unpack(_F32.pack(x))[0])


def shortest_float32(x: float) -> float:
    """The float64 nearest the shortest decimal that rounds to the float32 ``x`` (module docstring).
    ``x`` must be a float32 value (any float64 is first rounded to one)."""
    if x != x or x == 0.0 or x in (float("inf"), float("-inf")):
        return x
    x = _as_float32(x)
    for digits in range(1, 10):
        mantissa, _, exp = f"{x:.{digits - 1}e}".partition("e")
        unscaled = int(mantissa.replace(".", ""))
        scale = int(exp) - (digits - 1)
        found: list[tuple[Decimal, int, float]] = []
        for candidate in (unscaled - 1, unscaled, unscaled + 1):
            y = float(f"{candidate}e{scale}")
            try:
                if _as_float32(y) == x:  # exact distances; a tie goes to the even last digit
                    found.append((abs(Decimal(candidate).scaleb(scale) - Decimal(x)), candidate % 2, y))
            except OverflowError:
                continue
        if found:
            return min(found)[2]
    return x  # unreachable: nine digits always read back
