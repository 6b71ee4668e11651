"""A batch of mutations as ``Multi`` requests, and their responses as failures. Pure: no I/O.

Each :class:`~pipeline.core.model.Mutation` becomes a ``MutationProto`` placeholder (row, type,
``associated_cell_count``) plus its cells in KeyValue form (:mod:`connectors.hbase.native.cells`):

=================  ====================================  =================================
mutation           ``b"family:qualifier"`` key           ``b"family"`` key (no ``:``)
=================  ====================================  =================================
PUT                Put (4) at ``timestamp`` (or latest)  (a column with an empty qualifier)
DELETE             DeleteColumn (12), versions <= ts     DeleteFamily (14), versions <= ts
DELETE_VERSION     Delete (8) at exactly ``timestamp``   DeleteFamilyVersion (10)
=================  ====================================  =================================

A delete without cells is a whole-row delete: no cell, ``MutationProto.timestamp`` = ``timestamp``
(the server deletes every family up to it). A put without cells writes nothing and is not sent.
An :class:`~pipeline.core.model.ExpiringPut`'s TTL goes in the ``_ttl`` attribute (i64 BE, ms).

A ``Multi`` to one region server carries one ``RegionAction`` per region; the action index is the
mutation's position in the caller's batch + 1 (so that an absent index, 0, is never a real one). The
cellblock holds the cells of every action, in the order of the actions in the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from connectors.hbase.native.cells import (
    DELETE,
    DELETE_COLUMN,
    DELETE_FAMILY,
    DELETE_FAMILY_VERSION,
    LATEST_TIMESTAMP,
    PUT,
    encode_cell,
)
from connectors.hbase.native.failures import Failed
from connectors.hbase.native.messages import (
    MUTATE_DELETE,
    MUTATE_PUT,
    RegionActionResult,
    action,
    multi_request,
    mutation_proto,
    region_action,
)
from connectors.hbase.native.regions import Region
from pipeline.core.model import Mutation, MutationKind

__all__ = ["Encoded", "Group", "build_multi", "encode_mutation", "failures_of"]

#: one region and the batch positions of its mutations
Group = tuple[Region, Sequence[int]]


@dataclass(frozen=True, slots=True)
class Encoded:
    """One mutation, ready to send: its ``MutationProto`` and its cells (``count`` KeyValues)."""

    row: bytes
    proto: bytes
    cells: bytes
    count: int


def encode_mutation(m: Mutation) -> Encoded | None:
    """The wire form of a PUT, DELETE or DELETE_VERSION (table in the module docstring); None for a put
    without cells. Raises ``ValueError`` for an INCREMENT, a DELETE_VERSION without a timestamp, or a
    row/family the KeyValue format cannot hold."""
    ts = m.timestamp
    cell_ts = LATEST_TIMESTAMP if ts is None else ts
    row = m.row
    parts: list[bytes] = []
    if m.kind is MutationKind.PUT:
        if not m.cells:
            return None
        for column, value in m.cells.items():
            family, _, qualifier = column.partition(b":")
            parts.append(encode_cell(row, family, qualifier, cell_ts, PUT, value))
        proto = mutation_proto(row, MUTATE_PUT, len(parts), ts, m.ttl)
    elif m.kind is MutationKind.DELETE or m.kind is MutationKind.DELETE_VERSION:
        one = m.kind is MutationKind.DELETE_VERSION
        if one and ts is None:
            raise ValueError(f"a DELETE_VERSION of row {row!r} needs a timestamp")
        for column in m.cells:
            family, colon, qualifier = column.partition(b":")
            kind = (DELETE if one else DELETE_COLUMN) if colon else (DELETE_FAMILY_VERSION if one else DELETE_FAMILY)
            parts.append(encode_cell(row, family, qualifier, cell_ts, kind))
        proto = mutation_proto(row, MUTATE_DELETE, len(parts), ts)
    else:
        raise ValueError(f"{m.kind.name} is not a mutation the native writer sends")
    return Encoded(row, proto, b"".join(parts), len(parts))


def build_multi(groups: Sequence[Group], encoded: Sequence[Encoded | None]) -> tuple[bytes, bytes]:
    """``(MultiRequest bytes, cellblock)`` for the ``groups`` of one region server. Positions whose
    mutation encodes to None are skipped."""
    actions: list[bytes] = []
    cells: list[bytes] = []
    for region, positions in groups:
        acts = []
        for i in positions:
            e = encoded[i]
            if e is None:
                continue
            acts.append(action(i + 1, e.proto))
            cells.append(e.cells)
        actions.append(region_action(region.name, acts))
    return multi_request(actions), b"".join(cells)


def failures_of(groups: Sequence[Group], results: Sequence[RegionActionResult]) -> list[Failed]:
    """The failed batch positions of one ``Multi``: a whole-region exception fails each of the region's
    actions, an action exception its own. Raises ``ValueError`` when the response has fewer results
    than the request had region actions, or names an index that was not sent."""
    if len(results) != len(groups):
        raise ValueError(f"Multi answered {len(results)} region results for {len(groups)} region actions")
    out: list[Failed] = []
    for (region, positions), result in zip(groups, results, strict=True):
        sent = set(positions)
        for f in result.failures:
            if f.index is None:
                out.extend(Failed(i, region.name, f.java_class, f.message) for i in positions)
                break
            if f.index - 1 not in sent:
                raise ValueError(f"Multi answered index {f.index}, which region {region.name!r} was not sent")
            out.append(Failed(f.index - 1, region.name, f.java_class, f.message))
    return out
