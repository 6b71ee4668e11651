"""The worker's per-partition progress as pure bookkeeping: gaps Kafka never delivers are counted as
skipped (up to a stop offset at most), a stop offset counts as reached only by a position past it with
nothing of the partition in hand, and the in-flight budget pauses and resumes with hysteresis. The
same behaviour through a whole worker is in tests/unit/runtime/test_worker_twins.py; against a real
broker (records deleted before a backfill read them) in tests/integration/test_backfill.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.ingest.progress import Progress, Skip
from pipeline.core.model import TopicPartition

TP = TopicPartition("events", 0)
OTHER = TopicPartition("events", 1)


def test_gaps_between_delivered_records_are_counted_as_skipped() -> None:
    p = Progress(1000)
    assert p.assign(TP, committed=10) is None  # read from the commit: no seek
    assert p.delivered(TP, 10) is None
    p.read_up_to(TP, 12)
    assert p.delivered(TP, 20) == Skip(TP, 13, 20)  # 13..19 never came: retention, compaction
    assert p.skipped == {TP: 7} and p.next[TP] == 20


def test_without_a_known_start_the_first_record_sets_it() -> None:
    p = Progress(1000)
    assert p.assign(TP, committed=None) is None  # no commit, no start offset: Kafka's reset policy decides
    assert p.delivered(TP, 500) is None
    p.read_up_to(TP, 501)
    assert p.skipped == {} and p.next[TP] == 502


def test_a_start_offset_seeks_only_partitions_without_a_commit() -> None:
    p = Progress(1000, start_offsets={TP: 40, OTHER: 7})
    assert p.assign(TP, committed=None) == 40
    assert p.assign(OTHER, committed=9) is None
    assert p.next == {TP: 40, OTHER: 9} and p.committed == {OTHER: 9}


def test_a_gap_is_counted_only_up_to_the_stop_offset() -> None:
    p = Progress(1000, stop_at={TP: 100})
    p.assign(TP, committed=90)
    assert p.delivered(TP, 120) == Skip(TP, 90, 100)
    assert p.skipped == {TP: 10}


def test_stop_offset_is_reached_by_position_only_when_nothing_is_in_hand() -> None:
    p = Progress(1000, stop_at={TP: 100})
    p.assign(TP, committed=95)
    assert p.stop_candidates(busy=[TP]) == []  # registered, not yet written: not a candidate
    p.take_in_hand([TP])  # fetched records not yet routed
    assert p.stop_candidates(busy=[]) == []
    assert p.reached_stop(TP, 100, position=100) is False  # a fetch landed while asking the position
    p.release_hand()
    p.read_up_to(TP, 95)
    assert p.stop_candidates(busy=[]) == [(TP, 100)]
    assert p.reached_stop(TP, 100, position=99) is False
    assert p.reached_stop(TP, 100, position=100) == Skip(TP, 96, 100)  # 96..99 never delivered
    assert p.skipped == {TP: 4}


def test_a_bounded_run_is_done_when_every_non_empty_range_is_committed() -> None:
    p = Progress(1000, stop_at={TP: 5, OTHER: 0})
    assert not p.done()
    p.mark_committed({TP: 4})
    assert not p.done()
    p.mark_committed({TP: 5})
    assert p.done()
    assert not Progress(1000).done()  # unbounded: never


def test_partitions_past_their_stop_stay_paused() -> None:
    p = Progress(1000, stop_at={TP: 5})
    p.mark_committed({TP: 5})
    assert p.resumable([TP, OTHER]) == [OTHER]


def test_revocation_forgets_reading_state_but_keeps_commits() -> None:
    p = Progress(1000)
    p.assign(TP, committed=3)
    p.take_in_hand([TP])
    p.revoke([TP])
    assert TP not in p.assigned and TP not in p.next and TP not in p.in_hand
    assert p.committable({TP: 9, OTHER: 2}) == {}  # nothing of a partition no longer held
    assert p.committed == {TP: 3}


@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=60))
def test_the_budget_pauses_at_the_bound_and_resumes_below_half(sizes: list[int]) -> None:
    p = Progress(budget=1000)
    held: list[int] = []
    for n in sizes:
        if p.should_pause():
            p.set_paused(True)
        if p.paused:  # drain while paused, as the writers would
            while held and not p.may_resume():
                p.release_in_flight(held.pop(0))
            assert p.may_resume() or not held
            p.set_paused(False)
        assert p.in_flight < 1000 or not p.paused
        p.add_in_flight(n)
        held.append(n)
    assert p.in_flight == sum(held)
    assert p.in_flight < 1000 + 400  # at most one addition past the bound before it pauses
