"""Shared data of the reader tests: the designs under test (one per family of the guides: salted,
bucketed, reverse-time, hash-prefixed), their routes and rows, and tables for them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import orjson

from connectors.hbase import HBaseClient
from devstack import LocalStack
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.rowkey import RowKey, compile_rowkey
from pipeline.rowkey.splits import split_points
from pipeline.settings import FamilySpec, HBaseClientKind, HBaseSettings, RouteSpec

ORIGIN = Origin(TopicPartition("reader-test", 0), 0)
T0 = 1_700_000_000_000
HOSTS = ["a", "b", "web1", "web12", "z9"]
COLUMNS = {"d:h": {"field": "host"}, "d:n": {"field": "n", "encoding": "long"},
           "d:j": {"field": "j", "encoding": "json"}}


@dataclass(frozen=True)
class Design:
    spec: str
    regions: int
    time_desc: bool
    per_region: bool


DESIGNS = {
    "salted": Design("[salt(host, 8)][host][_][long(ts)]", 8, False, False),
    "bucketed": Design("[mod(ts, 4)][long(ts)][host]", 4, False, False),
    "reverse": Design("[salt(host, 4)][host][_][reverse_ts(ts)]", 4, True, False),
    "md5": Design("[md5(host, 4)][host][_][long(ts)]", 4, False, True),
}


def settings_of(stack: LocalStack, client: HBaseClientKind = "thrift") -> HBaseSettings:
    """The stack's HBase settings; with ``client="native"`` writes and scans go over HBase's RPC."""
    return HBaseSettings(port=stack.settings.thrift_port, thrift2_port=stack.settings.thrift2_port,
                         timeout_ms=20_000, client=client, masters=[f"localhost:{stack.settings.master_port}"])


def route_of(name: str, table: str, spec: str) -> RouteSpec:
    return RouteSpec(name=name, topic="t", table=table, rowkey=spec, columns=COLUMNS)


def mutation(rowkey: RowKey, table: str, host: str, ts: int) -> Mutation:
    cells = {b"d:h": host.encode(), b"d:n": (ts - T0).to_bytes(8, "big", signed=True),
             b"d:j": orjson.dumps({"host": host, "ts": ts})}
    return Mutation(table, rowkey.build({"host": host, "ts": ts}), MutationKind.PUT, cells, None,
                    ORIGIN)


async def create(hb: HBaseClient, table: str, rowkey: RowKey, regions: int) -> None:
    await hb.create_table(table, {"d": FamilySpec()}, split_points(rowkey, regions))


def design_tables(stack: LocalStack) -> Iterator[dict[str, str]]:
    """One table per design (name by design key), deleted afterwards; the ``reader_tables`` fixture
    holds them for a whole test module, so rows accumulate across examples."""
    names = {k: f"t_reader_{k}_{uuid.uuid4().hex[:8]}" for k in DESIGNS}

    async def setup() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            for key, d in DESIGNS.items():
                await create(hb, names[key], compile_rowkey(d.spec), d.regions)

    async def teardown() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            for name in names.values():
                await hb.delete_table(name)

    anyio.run(setup)
    yield names
    anyio.run(teardown)


async def load(hb: HBaseClient, table: str, rowkey: RowKey, hosts: list[str], n: int) -> None:
    await hb.write(table, [mutation(rowkey, table, h, T0 + t) for h in hosts for t in range(n)])
