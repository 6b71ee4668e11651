"""Reading a secret (a password, a client secret, a token) from the first line of a file named by a
``[kafka]`` key, with errors that name the key and the file, never the contents."""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import HBaseIngestError

__all__ = ["first_line"]


def first_line(path: Path, key: str, error: type[HBaseIngestError]) -> str:
    """The first line of ``path``, stripped; ``error`` naming ``[kafka] key`` and the file when it is
    missing, unreadable or empty."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise error(f"[kafka] {key} {str(path)!r} does not exist") from None
    except OSError as exc:
        raise error(f"[kafka] {key} {str(path)!r} cannot be read: {exc.strerror}") from None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise error(f"[kafka] {key} {str(path)!r} is empty")
    return lines[0].strip()
