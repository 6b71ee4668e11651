"""Routing a whole run as the worker does: the fast forms' runs (``Router.route_run``), and each record
they stop at by the reference (``Router.route_record``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.core.model import Mutation, Origin, TopicPartition
from pipeline.core.routes.router import CompiledRoute, Record, Router
from pipeline.errors import EventError

#: a refused record: its offset, the route that refused it (None: the record as a whole), why
Refused = tuple[int, str | None, EventError]


def route_all(router: Router, tp: TopicPartition, records: Sequence[Record],
              start: int = 0) -> tuple[list[Mutation], list[int], list[Refused]]:
    """Every mutation of ``records[start:]`` in order, the count of each record's, and the refusals."""
    mutations: list[Mutation] = []
    counts: list[int] = []
    refused: list[Refused] = []
    fanout = len(router.by_topic.get(tp.topic, ()))
    i, stop = start, len(records)
    while i < stop:
        run = router.route_run(tp, records, i, stop)
        assert i <= run.stop <= stop
        mutations += run.mutations
        counts += run.counts if run.counts is not None else [fanout] * (run.stop - i)
        i = run.stop
        if i == stop:
            break
        got = router.route_record(tp, records[i])
        mutations += got.mutations
        counts.append(len(got.mutations))
        refused += [(records[i].offset, r.route, r.error) for r in got.refusals]
        i += 1
    return mutations, counts, refused


def shown(m: Mutation) -> tuple[object, ...]:
    """Everything of a mutation, its cells in order and its weight included."""
    return (m.__class__, m.table, m.row, m.kind, list(m.cells.items()), m.timestamp, m.origin, m.amount, m.weight,
            m.size)


def fast_form_agrees(route: CompiledRoute, event: dict[str, Any], origin: Origin) -> bool:
    """Asserts that the route's fast form gives None or exactly the reference's one mutation for
    ``event`` (and never raises); returns whether it gave a mutation."""
    fast = route.mutation(event, origin)
    try:
        reference: list[Mutation] | None = route.reference.apply(event, origin)
    except EventError:
        reference = None
    if fast is None:
        return False
    assert reference is not None and len(reference) == 1, (event, fast, reference)
    assert shown(fast) == shown(reference[0]), event
    return True
