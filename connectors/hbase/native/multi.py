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
An INCREMENT is an Increment (1) of one Put-type cell at the latest timestamp whose value is the
amount (i64 BE), with a ``nonce``: sent again with the same nonce and nonce group (a retry after a
lost answer), the server applies it once.

A ``Multi`` to one region server carries one ``RegionAction`` per region; the action index is the
mutation's position in the caller's batch + 1 (so that an absent index, 0, is never a real one). The
cellblock holds the cells of every action, in the order of the actions in the request.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from connectors.hbase.native.cells import (
    DELETE,
    DELETE_COLUMN,
    DELETE_FAMILY,
    DELETE_FAMILY_VERSION,
    LATEST_TIMESTAMP,
    MAX_FAMILY,
    MAX_ROW,
    PUT,
    encode_cell,
)
from connectors.hbase.native.failures import Failed
from connectors.hbase.native.messages import (
    MUTATE_DELETE,
    MUTATE_INCREMENT,
    MUTATE_PUT,
    RegionActionResult,
    decode_multi_response,
    mutation_proto,
    region_specifier,
)
from connectors.hbase.native.regions import Region
from connectors.hbase.native.wire import varint
from pipeline import compiled
from pipeline.core.model import Mutation, MutationKind

__all__ = ["COMPILED", "Encoded", "Group", "build_multi", "decode_ok_python", "encode_batch", "encode_mutation",
           "encode_plain_puts", "encode_plain_puts_python", "failures_of", "halves", "multi_failures"]

_AMOUNT = struct.Struct(">q")
_HEAD = struct.Struct(">IIIH")  # a KeyValue's kv_len, key_len, val_len, row_len (connectors.hbase.native.cells)
_TAIL = struct.Struct(">QB")    # its timestamp, type
_VARINT = [varint(n) for n in range(128)]  # one-byte varints

#: one region and the batch positions of its mutations
Group = tuple[Region, Sequence[int]]


class Encoded(NamedTuple):
    """One mutation, ready to send: its ``MutationProto`` and its cells (``cells_count`` KeyValues)."""

    row: bytes
    proto: bytes
    cells: bytes
    cells_count: int


def encode_mutation(m: Mutation, nonce: int | None = None) -> Encoded | None:
    """The wire form of a mutation (table in the module docstring); None for a put without cells.
    ``nonce`` (not 0) is needed for an INCREMENT and only used by it. Raises ``ValueError`` for an
    INCREMENT without a nonce or of other than one column, a DELETE_VERSION without a timestamp, or a
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
    elif m.kind is MutationKind.INCREMENT:
        if not nonce or len(m.cells) != 1:
            raise ValueError(f"an INCREMENT of row {row!r} needs a nonce and exactly one column, got "
                             f"nonce {nonce!r} and {len(m.cells)} columns")
        family, _, qualifier = next(iter(m.cells)).partition(b":")
        parts.append(encode_cell(row, family, qualifier, LATEST_TIMESTAMP, PUT, _AMOUNT.pack(m.amount)))
        proto = mutation_proto(row, MUTATE_INCREMENT, 1, nonce=nonce)
    else:
        raise ValueError(f"{m.kind.name} is not a mutation the native writer sends")
    return Encoded(row, proto, b"".join(parts), len(parts))


def encode_batch(mutations: Sequence[Mutation], nonces: Sequence[int | None]) -> list[Encoded | None]:
    """``[encode_mutation(m, nonce) ...]``, the same bytes (and the same ``ValueError``), faster for the
    batches a worker writes: a PUT with a timestamp, cells and no TTL is laid out here in one pass,
    each column's ``family length | family | qualifier`` made once per batch; any other mutation goes
    through :func:`encode_mutation`."""
    out: list[Encoded | None] = []
    columns: dict[bytes, tuple[bytes, int]] = {}  # b"fam:qual" -> (u8 fam_len | family | qualifier, their length)
    head, tail, v = _HEAD.pack, _TAIL.pack, _VARINT
    for m, nonce in zip(mutations, nonces, strict=True):
        ts = m.timestamp
        cells = m.cells
        if m.kind is not MutationKind.PUT or ts is None or not cells or m.ttl is not None or not 0 <= ts < 1 << 63:
            out.append(encode_mutation(m, nonce))
            continue
        row = m.row
        rl = len(row)
        if not 0 < rl <= MAX_ROW:
            raise ValueError(f"row length {rl} is not in 1..{MAX_ROW}")
        end = tail(ts, PUT)
        parts: list[bytes] = []
        for column, value in cells.items():
            known = columns.get(column)
            if known is None:
                family, _, qualifier = column.partition(b":")
                if not 0 < len(family) <= MAX_FAMILY:
                    raise ValueError(f"family length {len(family)} is not in 1..{MAX_FAMILY}")
                known = columns[column] = (bytes((len(family),)) + family + qualifier, len(family) + len(qualifier))
            key_len = 12 + rl + known[1]
            parts += (head(8 + key_len + len(value), key_len, len(value), rl), row, known[0], end, value)
        n = len(cells)
        proto = b"".join((b"\x0a", v[rl] if rl < 128 else varint(rl), row, b"\x10\x02\x20", varint(ts), b"\x40",
                          v[n] if n < 128 else varint(n)))
        out.append(Encoded(row, proto, b"".join(parts), n))
    return out


def _plain(m: Mutation) -> bool:
    """A put the compiled encoder takes (``_multiwire.c``'s contract): a timestamp in [0, 2**63), no
    TTL, a row of 1..32767 bytes, a non-empty dict of bytes columns (family 1..127 bytes) to bytes."""
    ts, row, cells = m.timestamp, m.row, m.cells
    if (m.kind is not MutationKind.PUT or m.ttl is not None or type(ts) is not int or not 0 <= ts < 1 << 63
            or not isinstance(row, bytes) or not 0 < len(row) <= MAX_ROW or type(cells) is not dict or not cells):
        return False
    for column, value in cells.items():
        if not isinstance(column, bytes) or not isinstance(value, bytes):
            return False
        family = column.partition(b":")[0]
        if not 0 < len(family) <= MAX_FAMILY:
            return False
    return True


def encode_plain_puts_python(groups: Sequence[Group], mutations: Sequence[Mutation],
                             nonce_group: int | None = None) -> tuple[bytes, bytes] | None:
    """The pure-Python form of :func:`encode_plain_puts` (the reference of ``_multiwire.c``)."""
    encoded: list[Encoded | None] = [None] * len(mutations)
    for _, positions in groups:
        for i in positions:
            if not 0 <= i < len(mutations):
                raise IndexError(f"position {i} is outside the {len(mutations)} mutations")
            if not _plain(mutations[i]):
                return None
            encoded[i] = encode_batch([mutations[i]], [None])[0]
    return build_multi(groups, encoded, nonce_group)


_MULTIWIRE = compiled.load("connectors.hbase.native._multiwire", Path(__file__).with_name("_multiwire.c"))
_COMPILED_ENCODE: Callable[..., tuple[bytes, bytes] | None] | None = None if _MULTIWIRE is None else _MULTIWIRE.encode
_COMPILED_DECODE_OK: Callable[[bytes], list[list[int]] | None] | None = (
    None if _MULTIWIRE is None else _MULTIWIRE.decode_ok)
#: whether the compiled Multi encoder (and reader) is in use
COMPILED = _COMPILED_ENCODE is not None


def encode_plain_puts(groups: Sequence[Group], mutations: Sequence[Mutation],
                      nonce_group: int | None = None) -> tuple[bytes, bytes] | None:
    """``build_multi(groups, encoded, nonce_group)`` when every mutation at the groups' positions is a
    plain put (:func:`_plain`: what a worker's batch holds), laid out straight from the mutations by the
    compiled encoder (``_multiwire.c``) when it is in use, else by :func:`encode_plain_puts_python`;
    None when one is not, and the caller encodes the batch with :func:`encode_batch`."""
    if _COMPILED_ENCODE is not None:
        return _COMPILED_ENCODE([(r.name, p) for r, p in groups], mutations, nonce_group, MutationKind.PUT)
    return encode_plain_puts_python(groups, mutations, nonce_group)


def build_multi(groups: Sequence[Group], encoded: Sequence[Encoded | None],
                nonce_group: int | None = None) -> tuple[bytes, bytes]:
    """``(MultiRequest bytes, cellblock)`` for the ``groups`` of one region server. Positions whose
    mutation encodes to None are skipped. ``nonce_group``: the client's, when an action has a nonce.
    The bytes are :func:`~connectors.hbase.native.messages.multi_request` of
    :func:`~connectors.hbase.native.messages.region_action` of
    :func:`~connectors.hbase.native.messages.action` (the tests hold them to it), with the fields laid
    out inline: a batch holds thousands of actions."""
    v = _VARINT
    region_actions: list[bytes] = []
    cells: list[bytes] = []
    for region, positions in groups:
        spec = region_specifier(region.name)
        parts = [b"\x0a", varint(len(spec)), spec]
        for i in positions:
            e = encoded[i]
            if e is None:
                continue
            proto = e.proto
            index, size = i + 1, len(proto)
            act = b"".join((b"\x08", v[index] if index < 128 else varint(index), b"\x12",
                            v[size] if size < 128 else varint(size), proto))
            size = len(act)
            parts += (b"\x1a", v[size] if size < 128 else varint(size), act)
            cells.append(e.cells)
        ra = b"".join(parts)
        region_actions.append(b"\x0a" + varint(len(ra)) + ra)
    if nonce_group is not None:
        region_actions.append(b"\x10" + varint(nonce_group))
    return b"".join(region_actions), b"".join(cells)


def halves(groups: Sequence[Group]) -> tuple[list[Group], list[Group]]:
    """``groups``' positions cut in two in request order, for a request too large to send whole: the
    first half holds the first ``n // 2`` positions (``n`` >= 2, else ``ValueError``), the second the
    rest; a region whose positions straddle the cut appears in both, each half keeping its positions'
    order, and no region is left without positions."""
    n = sum(len(positions) for _, positions in groups)
    if n < 2:
        raise ValueError(f"a request of {n} action(s) cannot be halved")
    first: list[Group] = []
    second: list[Group] = []
    left = n // 2
    for region, positions in groups:
        take = min(left, len(positions))
        if take:
            first.append((region, positions[:take]))
        if take < len(positions):
            second.append((region, positions[take:]))
        left -= take
    return first, second


def failures_of(groups: Sequence[Group], results: Sequence[RegionActionResult]) -> list[Failed]:
    """The failed batch positions of one ``Multi``: a whole-region exception fails each of the region's
    actions, an action exception its own. Raises ``ValueError`` when the response has another number of
    results than the request had region actions, names an index that was not sent, or leaves a sent action
    without an answer (neither a result nor an exception: it would otherwise pass for written)."""
    if len(results) != len(groups):
        raise ValueError(f"Multi answered {len(results)} region results for {len(groups)} region actions")
    out: list[Failed] = []
    for (region, positions), result in zip(groups, results, strict=True):
        sent = set(positions)
        answered = {i - 1 for i in result.ok}
        whole = False
        for f in result.failures:
            if f.index is None:
                out.extend(Failed(i, region.name, f.java_class, f.message) for i in positions)
                whole = True
                break
            if f.index - 1 not in sent:
                raise ValueError(f"Multi answered index {f.index}, which region {region.name!r} was not sent")
            out.append(Failed(f.index - 1, region.name, f.java_class, f.message))
            answered.add(f.index - 1)
        if not whole and answered != sent:
            extra, missing = sorted(answered - sent), sorted(sent - answered)
            raise ValueError(f"Multi answered region {region.name!r} with indexes {[i + 1 for i in extra[:5]]} it "
                             f"was not sent, and none for {[i + 1 for i in missing[:5]]} ({len(missing)} in all)"
                             if extra else f"Multi left {len(missing)} action(s) of region {region.name!r} "
                             f"unanswered (indexes {[i + 1 for i in missing[:5]]}...)")
    return out


def decode_ok_python(buf: bytes) -> list[list[int]] | None:
    """The reference of ``_multiwire.c``'s ``decode_ok``: each RegionActionResult's succeeded indexes when
    :func:`~connectors.hbase.native.messages.decode_multi_response` reads ``buf`` without an error and
    without a failure, else None."""
    try:
        results = decode_multi_response(buf)
    except ValueError:
        return None
    if any(r.failures for r in results):
        return None
    return [r.ok for r in results]


def multi_failures(groups: Sequence[Group], buf: bytes) -> list[Failed]:
    """``failures_of(groups, decode_multi_response(buf))``: the failed positions of one ``Multi``'s answer
    ``buf``. When the compiled reader is in use and says that every action of every region succeeded, each
    index sent answered once (a worker's answer, thousands of actions; region servers answer them in
    reverse order), that is read without building an object per action; anything else goes through the
    Python reader. Raises what they raise (``ValueError``)."""
    if _COMPILED_DECODE_OK is not None:
        ok = _COMPILED_DECODE_OK(buf)
        if ok is not None and len(ok) == len(groups) and all(
                _same_indexes(indexes, positions) for indexes, (_, positions) in zip(ok, groups, strict=True)):
            return []
    return failures_of(groups, decode_multi_response(buf))


def _same_indexes(indexes: list[int], positions: Sequence[int]) -> bool:
    """Whether ``indexes`` (answered) are the ``positions`` sent, + 1, each once, in any order."""
    sent = [i + 1 for i in positions]
    return indexes == sent or sorted(indexes) == sorted(sent)
