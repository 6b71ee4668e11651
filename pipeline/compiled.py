"""The compiled parts of the package: which are in use.

A compiled part is a C extension module built by the package's build (``hatch_build.py``) from a C
source beside it, with a pure-Python form that is its reference (same results, a property test each).
:func:`load` returns the extension module when a build of its *current* source is importable (the
build embeds its source's SHA-256 as ``SOURCE_SHA256``; a build of another source, left by an older
install, is not used), else None, and the caller runs the pure-Python form. With
``HBASE_INGEST_PURE_PYTHON=1`` in the environment at import, no compiled part is used (the
benchmarks compare the two forms this way).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from types import ModuleType

__all__ = ["load", "pure_python"]


def pure_python() -> bool:
    """Whether the environment asks for the pure-Python forms (``HBASE_INGEST_PURE_PYTHON=1``)."""
    return os.environ.get("HBASE_INGEST_PURE_PYTHON") == "1"


def load(module: str, source: Path) -> ModuleType | None:
    """The extension ``module`` built from ``source`` (its C file), if a build of that file's current
    content is importable and :func:`pure_python` is off; else None. A missing source file (an
    installation without it) does not disqualify the build."""
    if pure_python():
        return None
    try:
        found = importlib.import_module(module)
    except ImportError:
        return None
    if source.is_file() and hashlib.sha256(source.read_bytes()).hexdigest() != getattr(found, "SOURCE_SHA256", None):
        return None  # built from another source: reinstall the package (pip install -e .) to rebuild it
    return found
