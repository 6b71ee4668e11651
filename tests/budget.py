"""Example counts of the property tests that exercise the compiled parts."""

from __future__ import annotations

import os

__all__ = ["examples"]


def examples(n: int) -> int:
    """``n`` examples, scaled by ``TEST_EXAMPLES_SCALE`` (``make sanitize`` runs the compiled parts' tests
    a few times slower, with fewer examples), never below 20."""
    return max(20, round(n * float(os.environ.get("TEST_EXAMPLES_SCALE", "1"))))
