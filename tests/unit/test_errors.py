"""Every project error pickles and copies as itself (type, message, args and fields), whatever its
constructor's signature, and crosses a real process boundary intact."""

from __future__ import annotations

import copy
import importlib
import pickle
import pkgutil
from typing import Any

import anyio
import anyio.to_process
import pytest

import connectors
import pipeline
from pipeline.core.routes.reference import PartlyRefused
from pipeline.errors import (
    ConfigError,
    EventError,
    HBaseAuthError,
    HBaseError,
    HBaseIngestError,
    HBaseRequestError,
    HBaseTimeout,
    HBaseUnavailable,
    KafkaAuthError,
    KafkaCommitFailed,
    KafkaError,
    KafkaUnavailable,
    RegionMapStale,
    RegistryError,
    RegistryUnavailable,
    SchemaNotFound,
    StackError,
    TableNotFound,
    TopicNotCreated,
)
from pipeline.rowkey.errors import EventFieldError, KeyDecodeError, PlanError, RowKeyError, SpecSyntaxError
from pipeline.runtime.ingest.writer import WriteAbandoned
from pipeline.runtime.read.columns import CellDecodeError
from pipeline.runtime.read.errors import QueryError, RowDecodeError

SAMPLES: list[HBaseIngestError] = [
    HBaseIngestError("plain"),
    ConfigError("route 'r': no such topic"),
    EventError("missing_field", "field 'host' is missing"),
    PartlyRefused("contains_delimiter", "route 'r': field 'k' contains b'_'", []),
    StackError("java not found"),
    KafkaError("broker down"),
    KafkaUnavailable("fetching records (group 'g' at 127.0.0.1:9092): Kafka is unreachable"),
    KafkaCommitFailed("committing offsets: the group refused the commit"),
    KafkaAuthError("starting the consumer: Kafka refused the client's credentials"),
    TopicNotCreated("topic 't' refused"),
    RegistryError("registry http://r:8085: HTTP 401, the credentials were refused"),
    RegistryUnavailable("registry http://r:8085: fetching schema id 3 timed out"),
    SchemaNotFound("registry http://r:8085: fetching schema id 3: not found", schema_id=3),
    HBaseError("call failed", table="t"),
    HBaseUnavailable("refused"),
    HBaseTimeout("slow", table="t"),
    RegionMapStale("moved", table="t"),
    TableNotFound("gone", table="t"),
    HBaseRequestError("bad", table=None),
    HBaseAuthError("the gateway localhost:9190 refused the Kerberos login: Bad SASL result"),
    RowKeyError("bad key"),
    SpecSyntaxError("unexpected ']'", "[salt(host, 16)]]", 16),
    EventFieldError("user.id", {"nested": [1, 2]}, "bad_type", "expected a string"),
    KeyDecodeError("3 bytes left over"),
    PlanError("ambiguous boundary"),
    WriteAbandoned("shutting down"),
    QueryError("range salt=3 failed: gone", table="t", range_label="salt=3", timed_out=True),
    QueryError("cannot plan", table="t"),
    RowDecodeError(b"\x03web1", "column 'd:v' (long): expected 8 bytes, got 3"),
    CellDecodeError("d:v", "long", "expected 8 bytes, got 3"),
]


def every_error_class() -> set[type[HBaseIngestError]]:
    for package in (pipeline, connectors):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: set[type[HBaseIngestError]] = set()
    todo: list[type[HBaseIngestError]] = [HBaseIngestError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo += [c for c in cls.__subclasses__() if c.__module__.startswith(("pipeline.", "connectors."))]
    return found


def listed_in_the_tree() -> set[str]:
    """The class names drawn in pipeline.errors' docstring tree (the first word of each tree line)."""
    import pipeline.errors

    names = set()
    for line in (pipeline.errors.__doc__ or "").splitlines():
        words = line.translate(str.maketrans("│├└─", "    ")).split()
        if words and (line.lstrip().startswith(("├", "└", "│")) or words[0] == "HBaseIngestError"):
            names.add(words[0])
    return names


def test_the_tree_in_the_errors_module_lists_every_error_class() -> None:
    assert {cls.__name__ for cls in every_error_class()} - listed_in_the_tree() == set()
    assert listed_in_the_tree() - {cls.__name__ for cls in every_error_class()} == set()  # nothing stale


def same(a: BaseException, b: BaseException) -> bool:
    return type(a) is type(b) and str(a) == str(b) and a.args == b.args and vars(a) == vars(b)


def test_every_error_class_has_a_sample() -> None:
    # a new error class must be added to SAMPLES, so that the round trips below cover it
    assert every_error_class() - {type(e) for e in SAMPLES} == set()


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_pickles_and_copies_as_itself(err: HBaseIngestError) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert same(pickle.loads(pickle.dumps(err, protocol)), err)
    assert same(copy.copy(err), err)
    assert same(copy.deepcopy(err), err)


def test_fields_set_after_construction_survive() -> None:
    err = HBaseUnavailable("refused", table="t")
    err.add_note("while writing batch 7")
    err.attempt = 3  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(err))
    assert back.attempt == 3 and back.table == "t"
    assert back.__notes__ == ["while writing batch 7"]


def raise_query_error() -> None:
    raise QueryError("range salt=3 failed: gone", table="t", range_label="salt=3", timed_out=True)


async def test_crosses_a_worker_process_as_itself() -> None:
    with pytest.raises(QueryError) as info:
        await anyio.to_process.run_sync(raise_query_error)
    err: Any = info.value
    assert (err.table, err.range_label, err.timed_out) == ("t", "salt=3", True)
    assert str(err) == "range salt=3 failed: gone (table 't', range salt=3)"
