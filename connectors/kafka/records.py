"""Consumed records without a ``ConsumerRecord`` each: aiokafka's decoded records as they are.

aiokafka decodes a fetched record batch into one record object per record (offset, timestamp, key,
value, headers: its C extension's ``DefaultRecord``, or the pure-Python form), then copies each into
a new ``ConsumerRecord`` (11 fields, plus a tuple of the headers) in a Python method. That copy was
about a third of the worker's Kafka fetch (0.45 of 1.2 CPU-us per record, one consumer reading a
topic of ``logs`` events with nothing else to do) and carries nothing the worker reads: it takes the
topic and partition from the fetch's mapping, and the rest are the decoded record's own attributes.

A consumer opts in by passing :data:`DECODED_RECORDS` as its ``value_deserializer``
(:class:`connectors.kafka.source.KafkaSource` does). Its fetches then yield the decoded records
themselves, which satisfy :class:`pipeline.ports.KafkaRecord`; other consumers in the process are
untouched (they get ``ConsumerRecord`` objects as before). The hook is aiokafka's ``PartitionRecords``
(one per fetched partition), replaced in ``aiokafka.consumer.fetcher`` by a subclass that changes
only the opted-in instances. When aiokafka's internals are not the ones this was written for (its
constructor's parameters or the per-record method differ), nothing is replaced and
:data:`DECODED_RECORDS` is a plain identity deserializer: the records are ``ConsumerRecord`` objects
again, correct and slower (:func:`installed` says which).
"""

from __future__ import annotations

import inspect
from typing import Any

import aiokafka.consumer.fetcher as _fetcher

__all__ = ["DECODED_RECORDS", "installed"]

_EXPECTED = ["tp", "records", "aborted_transactions", "fetch_offset", "key_deserializer",
             "value_deserializer", "check_crcs", "isolation_level"]


def DECODED_RECORDS(value: bytes | None) -> bytes | None:  # a marker, named as a constant
    """The opt-in marker (an identity deserializer, so that it is harmless where it is not recognised)."""
    return value


def _itself(tp: Any, record: Any) -> Any:
    return record


def _fits(cls: type) -> bool:
    try:
        params = list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return False
    per_record = getattr(cls, "_consumer_record", None)
    return params == _EXPECTED and callable(per_record)


_ORIGINAL = _fetcher.PartitionRecords


class _PartitionRecords(_ORIGINAL):  # type: ignore[misc,valid-type]
    """aiokafka's ``PartitionRecords``; for a consumer that passed :data:`DECODED_RECORDS` (and no key
    deserializer), its per-record copy is the record itself (an instance attribute shadows the method)."""

    def __init__(self, tp: Any, records: Any, aborted_transactions: Any, fetch_offset: int, key_deserializer: Any,
                 value_deserializer: Any, check_crcs: bool, isolation_level: Any) -> None:
        decoded = value_deserializer is DECODED_RECORDS and key_deserializer is None
        super().__init__(tp, records, aborted_transactions, fetch_offset, key_deserializer,
                         None if decoded else value_deserializer, check_crcs, isolation_level)
        if decoded:
            self._consumer_record = _itself


def installed() -> bool:
    """Whether consumers passing :data:`DECODED_RECORDS` get the decoded records (else ``ConsumerRecord``)."""
    return _fetcher.PartitionRecords is _PartitionRecords


if _fits(_ORIGINAL):
    _fetcher.PartitionRecords = _PartitionRecords
