"""Bounded logging of per-event warnings: the first of a key per interval in full, the rest counted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.digest import Digest, LogDigest


def test_first_in_full_then_counted_then_one_digest_per_interval() -> None:
    d = LogDigest(10)
    assert d.note("dead/undecodable", {"offset": 1}, now=0.0)
    assert not d.note("dead/undecodable", {"offset": 2}, now=1.0)
    assert not d.note("dead/undecodable", {"offset": 3}, now=2.0)
    assert d.note("dead/bad_type", {"offset": 4}, now=2.0)  # another key: logged in full
    assert d.due(now=9.0) == []
    assert d.due(now=10.0) == [Digest("dead/undecodable", 2, {"offset": 2}, 0.0, 10.0)]
    assert not d.note("dead/undecodable", {"offset": 5}, now=11.0)  # still busy: counted
    assert d.drain(now=12.0) == [Digest("dead/undecodable", 1, {"offset": 5}, 10.0, 12.0)]


def test_a_key_quiet_for_an_interval_is_logged_in_full_again() -> None:
    d = LogDigest(10)
    assert d.note("k", {}, now=0.0)
    assert d.due(now=10.0) == []  # nothing held back: forgotten
    assert d.note("k", {}, now=30.0)


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=500))
def test_every_occurrence_is_logged_or_counted_and_lines_stay_bounded(gaps: list[float]) -> None:
    d = LogDigest(5)
    now, full, counted, lines = 0.0, 0, 0, 0
    for gap in gaps:
        now += gap
        if d.note("k", {}, now):
            full += 1
            lines += 1
        for dg in d.due(now):
            counted += dg.count
            lines += 1
    for dg in d.drain(now):
        counted += dg.count
        lines += 1
    assert full + counted == len(gaps)
    assert lines <= 2 * (now // 5 + 1) + 1  # a full line and a digest per interval, at most
