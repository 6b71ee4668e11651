"""Lines a test wants on the terminal of every run, such as the exact refusal texts and figures that the
issues' closing notes quote. pytest captures a passing test's output; :func:`show` writes the line now
(seen with ``-s``) and keeps it, and the integration tests' conftest prints every kept line in the
terminal summary, under "shown by the tests"."""

from __future__ import annotations

import sys

__all__ = ["SHOWN", "show"]

#: every line shown so far in this session, in order
SHOWN: list[str] = []


def show(text: str) -> None:
    """Write ``text`` (one or more lines; surrounding newlines dropped) and keep it for the summary."""
    text = text.strip("\n")
    SHOWN.append(text)
    sys.stdout.write(f"\n{text}\n")
