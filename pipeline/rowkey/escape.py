"""HBase shell escaping of binary keys, as ``Bytes.toStringBinary`` / ``Bytes.toBytesBinary``.

``format_key`` keeps printable ASCII (0x20..0x7E) except the backslash and writes every other byte
as ``\\xNN`` with uppercase hex, so ``b"\\x00\\x01abc"`` prints as ``\\x00\\x01abc``. ``parse_key``
is its inverse and also accepts lowercase hex digits.
"""

from __future__ import annotations

__all__ = ["format_key", "parse_key"]

_TABLE = tuple(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in range(256))
_HEX = frozenset("0123456789abcdefABCDEF")


def format_key(key: bytes) -> str:
    """Render ``key`` the way the HBase shell prints row keys."""
    return "".join([_TABLE[b] for b in key])


def parse_key(text: str) -> bytes:
    """Parse HBase shell notation (``\\xNN`` escapes, other characters as Latin-1) back to bytes.

    Raises ValueError for a character above U+00FF.
    """
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 3 < n and text[i + 1] in "xX" and set(text[i + 2 : i + 4]) <= _HEX:
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
            continue
        code = ord(ch)
        if code > 0xFF:
            raise ValueError(f"character {ch!r} at {i} is not a byte; use \\xNN escapes")
        out.append(code)
        i += 1
    return bytes(out)
