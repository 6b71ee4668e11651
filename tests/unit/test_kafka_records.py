"""connectors.kafka.records: the decoded records a fetch yields, against aiokafka's ConsumerRecord copies.

The record batches are built by aiokafka's own builder (the bytes a broker returns for a fetch), and
read through aiokafka's ``PartitionRecords`` exactly as its fetcher reads them; the real consumer is
covered by tests/integration/test_connectors.py."""

from __future__ import annotations

from typing import Any

import aiokafka.consumer.fetcher as fetcher
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import ConsumerRecord, TopicPartition

from connectors.kafka import records as lean
from connectors.kafka.records import DECODED_RECORDS

TP = TopicPartition("t", 3)
READ_COMMITTED = 1


def _batches(first: int, n: int, per_batch: int) -> bytes:
    out = b""
    for start in range(first, first + n, per_batch):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for offset in range(start, min(start + per_batch, first + n)):
            key = None if offset % 3 == 0 else b"k%d" % offset
            value = None if offset % 7 == 6 else b'{"n": %d}' % offset
            headers = [("h", b"v%d" % offset)] if offset % 2 else []
            builder.append(offset - start, timestamp=1_700_000_000_000 + offset, key=key, value=value,
                           headers=headers)
        # the broker sets a batch's base offset (bytes 0-7, big-endian, outside the CRC): here, its first record's
        out += start.to_bytes(8, "big") + bytes(builder.build())[8:]
    return out


def _read(raw: bytes, fetch_offset: int, value_deserializer: Any, key_deserializer: Any = None) -> list[Any]:
    return list(fetcher.PartitionRecords(TP, MemoryRecords(raw), [], fetch_offset, key_deserializer,
                                         value_deserializer, True, READ_COMMITTED))


def _fields(r: Any) -> tuple[Any, ...]:
    return r.offset, r.timestamp, r.key, r.value, list(r.headers)


def test_the_hook_is_installed_on_this_aiokafka() -> None:
    assert lean.installed(), "aiokafka's PartitionRecords changed: the worker reads ConsumerRecord copies again"


def test_decoded_records_carry_what_consumer_records_carry() -> None:
    raw = _batches(0, 60, 16)
    plain = _read(raw, 0, None)
    decoded = _read(raw, 0, DECODED_RECORDS)
    assert len(plain) == len(decoded) == 60
    assert all(isinstance(r, ConsumerRecord) for r in plain)
    assert not any(isinstance(r, ConsumerRecord) for r in decoded)
    assert [_fields(r) for r in decoded] == [_fields(r) for r in plain]
    assert [r.offset for r in decoded] == list(range(60))


def test_a_fetch_from_inside_a_batch_starts_at_the_fetch_offset() -> None:
    raw = _batches(0, 40, 40)
    decoded = _read(raw, 25, DECODED_RECORDS)
    assert [r.offset for r in decoded] == list(range(25, 40))
    assert [_fields(r) for r in decoded] == [_fields(r) for r in _read(raw, 25, None)]


def test_other_deserializers_still_get_consumer_records() -> None:
    raw = _batches(0, 5, 5)
    upper = _read(raw, 0, lambda v: None if v is None else v.upper())
    assert all(isinstance(r, ConsumerRecord) for r in upper)
    assert upper[1].value == b'{"N": 1}'
    # a key deserializer is honoured: no decoded records then, the marker is an identity deserializer
    keyed = _read(raw, 0, DECODED_RECORDS, key_deserializer=lambda k: k)
    assert all(isinstance(r, ConsumerRecord) for r in keyed)
    assert [r.value for r in keyed] == [r.value for r in _read(raw, 0, None)]


def test_an_aiokafka_with_other_internals_is_left_alone() -> None:
    class Other:
        def __init__(self, tp: Any, records: Any, fetch_offset: int) -> None: ...

        def _consumer_record(self, tp: Any, record: Any) -> Any: ...

    class NoPerRecordCopy:
        def __init__(self, tp: Any, records: Any, aborted_transactions: Any, fetch_offset: int, key_deserializer: Any,
                     value_deserializer: Any, check_crcs: bool, isolation_level: Any) -> None: ...

    assert not lean._fits(Other)
    assert not lean._fits(NoPerRecordCopy)
    assert lean._fits(lean._ORIGINAL)


@pytest.mark.parametrize("value", [None, b"", b"x" * 10])
def test_the_marker_is_an_identity(value: bytes | None) -> None:
    assert DECODED_RECORDS(value) is value
