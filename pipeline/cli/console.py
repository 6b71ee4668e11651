"""The console every command prints its tables and reports to.

On a terminal (or with ``COLUMNS`` set) it is rich's usual console: the terminal's width, long cells
folded or shortened to fit. Anywhere else (a pipe, a file, a CI log) rich would fall back to 80
columns (or to the width of a terminal on stdin) and break ports and paths mid-word, or cut them
short with "…"; there the console is :data:`UNFOLDED_WIDTH` wide, so each table is as wide as its
content and each line of text stays one line.

Whether stdout is a terminal is asked of the file itself, not of rich: ``FORCE_COLOR`` (set by many CI
runners) makes rich treat a pipe as a terminal of 80 columns.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

__all__ = ["UNFOLDED_WIDTH", "output_console", "unfolded"]

#: The width of a console that does not fold: a table wider than this still folds.
UNFOLDED_WIDTH = 100_000


def _folds() -> bool:
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(os.environ.get("COLUMNS")) or (isatty is not None and bool(isatty()))


def output_console(*, soft_wrap: bool = False) -> Console:
    """A console on stdout: rich's default width on a terminal or when ``COLUMNS`` is set, else
    :data:`UNFOLDED_WIDTH` columns (a text line wraps only past that width; a table takes its natural
    width, so no cell folds or ends in "…", and its title is centred over it as on a terminal).
    ``soft_wrap`` is rich's, either way.

    Decided when called, from the stdout of that moment."""
    if _folds():
        return Console(soft_wrap=soft_wrap)
    return Console(soft_wrap=soft_wrap, width=UNFOLDED_WIDTH)


def unfolded(console: Console) -> bool:
    """Whether ``console`` is one of :func:`output_console`'s that never fold (cells that are
    capped on a terminal can then be shown whole)."""
    return console.width >= UNFOLDED_WIDTH
