"""The Multi encoders against the one reference, ``encode_mutation`` + ``build_multi``, on any input:
``encode_batch`` (the same encodings, or the same error) and ``encode_plain_puts`` (the compiled
``_multiwire.c`` when built, and its pure-Python form: the same bytes for batches of plain puts, None
as soon as one mutation is not one)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.hbase.native import multi
from connectors.hbase.native.multi import build_multi, encode_batch, encode_mutation, encode_plain_puts_python
from connectors.hbase.native.regions import Region
from pipeline.core.model import ExpiringPut, Mutation, MutationKind, Origin, TopicPartition
from tests.budget import examples

ORIGIN = Origin(TopicPartition("t", 0), 0)
LONG_ROW = b"r" * 32768  # one byte over HBase's row limit


class _LongRow(bytes):
    def __repr__(self) -> str:
        return f"<{len(self)}-byte row>"


REGIONS = [Region(b"t,%d,1.%s." % (k, b"ab" * 16), "t", b"", b"", 1, "rs", 16020) for k in range(3)]

columns = st.one_of(st.sampled_from([b"d:a", b"d:bb", b"e:", b"e", b"d:x:y"]),
                    st.binary(max_size=12),  # anything: an empty or over-long family among them
                    st.builds(lambda q: b"f" * 128 + b":" + q, st.binary(max_size=2)))
values = st.one_of(st.binary(max_size=40), st.binary(min_size=120, max_size=140))
rows = st.one_of(st.binary(min_size=1, max_size=40), st.just(b""), st.just(_LongRow(LONG_ROW)))
stamps = st.one_of(st.integers(0, 2**41), st.just(2**63 - 1), st.none(), st.integers(-(2**63), -1))
plain_puts = st.builds(lambda row, cells, ts: Mutation("t", row, MutationKind.PUT, cells, ts, ORIGIN),
                       st.binary(min_size=1, max_size=40),
                       st.dictionaries(st.sampled_from([b"d:a", b"d:bb", b"e:", b"e", b"d:x:y"]), values,
                                       min_size=1, max_size=5),
                       st.integers(0, 2**63 - 1))
any_mutation = st.one_of(
    plain_puts,
    st.builds(lambda row, cells, ts: Mutation("t", row, MutationKind.PUT, cells, ts, ORIGIN),
              rows, st.dictionaries(columns, values, max_size=4), stamps),
    st.builds(lambda row, cells, ts: ExpiringPut("t", row, cells, ts, ORIGIN, 0, ttl=60_000),
              st.binary(min_size=1, max_size=8), st.dictionaries(columns, values, min_size=1, max_size=2),
              st.integers(0, 2**41)),
    st.builds(lambda row, kind, cells, ts: Mutation("t", row, kind, cells, ts, ORIGIN),
              st.binary(min_size=1, max_size=8), st.sampled_from([MutationKind.DELETE, MutationKind.DELETE_VERSION]),
              st.dictionaries(columns, st.just(b""), max_size=3), st.one_of(st.none(), st.integers(0, 2**41))),
    st.builds(lambda row, amount: Mutation("t", row, MutationKind.INCREMENT, {b"d:n": b""}, None, ORIGIN,
                                           amount=amount),
              st.binary(min_size=1, max_size=8), st.integers(-(2**63), 2**63 - 1)),
)
NONCE = 12345
Groups = list[tuple[Region, list[int]]]


def _reference(m: Mutation) -> Any:
    """``encode_mutation``'s answer: the encoding, or the type of the error it raises."""
    try:
        return encode_mutation(m, NONCE)
    except Exception as e:  # the error's type is the answer compared
        return type(e)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(any_mutation, max_size=10))
def test_encode_batch_is_encode_mutation_on_any_input(batch: list[Mutation]) -> None:
    expected = [_reference(m) for m in batch]
    errors = [e for e in expected if isinstance(e, type)]
    if errors:
        with pytest.raises(errors[0]):  # the first mutation the reference refuses stops the batch
            encode_batch(batch, [NONCE] * len(batch))
    else:
        assert encode_batch(batch, [NONCE] * len(batch)) == expected


@st.composite
def grouped(draw: st.DrawFn, mutation: st.SearchStrategy[Mutation]) -> tuple[list[Mutation], Groups]:
    batch = draw(st.lists(mutation, min_size=1, max_size=12))
    order = draw(st.permutations(range(len(batch))))
    cuts = sorted(draw(st.lists(st.integers(0, len(batch)), max_size=2)))
    bounds = [0, *cuts, len(batch)]
    groups = [(REGIONS[k % 3], list(order[bounds[k]:bounds[k + 1]])) for k in range(len(bounds) - 1)]
    return batch, groups


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=grouped(plain_puts), nonce_group=st.one_of(st.none(), st.integers(1, 2**63 - 1)))
def test_plain_puts_are_laid_out_as_the_reference_lays_them(
        case: tuple[list[Mutation], Groups], nonce_group: int | None) -> None:
    batch, groups = case
    expected = build_multi(groups, [encode_mutation(m) for m in batch], nonce_group)
    assert encode_plain_puts_python(groups, batch, nonce_group) == expected
    assert multi.encode_plain_puts(groups, batch, nonce_group) == expected  # the compiled form, when built


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=grouped(any_mutation))
def test_a_batch_that_is_not_all_plain_puts_is_left_to_the_python_path(
        case: tuple[list[Mutation], Groups]) -> None:
    batch, groups = case
    python = encode_plain_puts_python(groups, batch, None)
    assert multi.encode_plain_puts(groups, batch, None) == python
    if python is not None:
        assert python == build_multi(groups, [encode_mutation(m) for m in batch])


def test_positions_outside_the_batch_are_refused() -> None:
    put = Mutation("t", b"r", MutationKind.PUT, {b"d:a": b"v"}, 1, ORIGIN)
    for bad in (1, -1):
        with pytest.raises(IndexError):
            encode_plain_puts_python([(REGIONS[0], [bad])], [put])
        with pytest.raises(IndexError):
            multi.encode_plain_puts([(REGIONS[0], [bad])], [put])
