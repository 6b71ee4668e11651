"""Table admin on the real HBase: pre-split boundaries read back, region row counts, the CLI."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from connectors.hbase import HBaseClient
from pipeline.core.keyspace import region_index, sample_events
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.rowkey import compile_rowkey
from pipeline.runtime.admin.tables import create_tables, describe_table, plan_tables
from pipeline.settings import FamilySpec, HBaseSettings, RouteSpec, Settings, TableSpec

ORIGIN = Origin(TopicPartition("t", 0), 0)
EVENTS = sample_events(600, seed=5)


def route(name: str, table: str, rowkey: str, **extra: Any) -> RouteSpec:
    return RouteSpec.model_validate({"name": name, "topic": f"{name}-topic", "table": table,
                                     "rowkey": rowkey, "columns": {"d:v": "value"},
                                     "timestamp_field": "ts", **extra})


async def write_events(hb: HBaseClient, table: str, rowkey: str) -> list[bytes]:
    rk = compile_rowkey(rowkey)
    keys = sorted({rk.build(e) for e in EVENTS})
    await hb.write(table, [Mutation(table, k, MutationKind.PUT, {b"d:v": b"1"}, None, ORIGIN)
                           for k in keys])
    return keys


async def bounds(hb: HBaseClient, table: str) -> list[tuple[bytes, bytes]]:
    return [(r.start_key, r.end_key) for r in await hb.regions(table)]


def tiles(splits: tuple[bytes, ...]) -> list[tuple[bytes, bytes]]:
    edges = [b"", *splits, b""]
    return list(itertools.pairwise(edges))


async def test_salted_and_hex_tables_have_the_planned_boundaries(
        hbase: HBaseClient, hbase_settings: HBaseSettings, unique: str) -> None:
    salted, hexed = f"t_salted_{unique}", f"t_hex_{unique}"
    settings = Settings(
        hbase=hbase_settings,
        tables=[TableSpec(name=salted, families={"d": FamilySpec(versions=3, ttl_s=86400)})],
        routes=[route("salted", salted, "[salt(host, metric, 8)][long(ts)][host]"),
                route("hexed", hexed, "[md5(user_id, 2)][user_id][_][long(ts)]")])
    created = await create_tables(hbase, settings, regions=None)
    try:
        assert [(c.table, c.action) for c in created] == [(salted, "created"), (hexed, "created")]
        s, h = created[0].plan, created[1].plan
        assert s.method == h.method == "design"
        assert s.split_keys == tuple(bytes([i]) for i in range(1, 8))  # one region per salt value
        assert h.regions == 256 and h.split_keys[:3] == (b"01", b"02", b"03")  # over the hex space
        assert await bounds(hbase, salted) == tiles(s.split_keys)
        assert await bounds(hbase, hexed) == tiles(h.split_keys)
        assert await hbase.families(salted) == {"d": 3}
        assert await hbase.families(hexed) == {"d": 1}  # no [[tables]] entry: the routes' families

        keys = await write_events(hbase, salted, s.rowkey)
        desc = await describe_table(hbase, salted, compile_rowkey(s.rowkey), route="salted")
        expected = Counter(region_index(s.split_keys, k) for k in keys)
        assert [r.rows for r in desc.regions] == [expected[i] for i in range(8)]
        assert all(r.rows for r in desc.regions)  # no empty region
        assert desc.rows == len(set(keys))
        assert [r.start_label for r in desc.regions] == [None] + [f"salt={i}" for i in range(1, 8)]
        dist = desc.distribution()
        assert dist is not None and dist.empty_regions == 0 and dist.total == len(keys)

        capped = await describe_table(hbase, salted, max_count=10)
        assert all(r.rows == 10 and r.capped for r in capped.regions)
        uncounted = await describe_table(hbase, salted, count=False)
        assert uncounted.rows is None and all(r.rows is None for r in uncounted.regions)
    finally:
        await hbase.delete_table(salted)
        await hbase.delete_table(hexed)


async def test_unsalted_design_splits_at_sample_quantiles_and_existing_tables_stay(
        hbase: HBaseClient, hbase_settings: HBaseSettings, unique: str) -> None:
    table = f"t_timefirst_{unique}"
    settings = Settings(
        hbase=hbase_settings,
        routes=[route("first", table, "[long(ts)][host]"),
                route("second", table, "[salt(host, 4)][host]",
                      counter={"column": "c:n"})])  # shares the table: its family joins
    plans = plan_tables(settings, regions=4, sample_events=EVENTS)
    assert len(plans) == 1 and plans[0].route == "first" and plans[0].method == "sample"
    assert set(plans[0].families) == {"d", "c"}
    created = await create_tables(hbase, settings, regions=4, sample_events=EVENTS)
    try:
        plan = created[0].plan
        assert created[0].action == "created" and len(plan.split_keys) == 3
        assert await bounds(hbase, table) == tiles(plan.split_keys)
        keys = await write_events(hbase, table, plan.rowkey)
        desc = await describe_table(hbase, table, compile_rowkey(plan.rowkey))
        counts = [r.rows or 0 for r in desc.regions]
        assert counts == [sum(1 for k in keys if region_index(plan.split_keys, k) == i)
                          for i in range(4)]
        assert max(counts) - min(counts) <= 2  # quantiles cut the past evenly
        assert desc.regions[1].start_label is not None and "ts=" in desc.regions[1].start_label

        again = await create_tables(hbase, settings, regions=2, sample_events=EVENTS)
        assert again[0].action == "exists"
        assert len(await hbase.regions(table)) == 4  # left alone
        redone = await create_tables(hbase, settings, route="first", regions=2,
                                     recreate=True, sample_events=EVENTS)
        assert redone[0].action == "recreated"
        assert await bounds(hbase, table) == tiles(redone[0].split_keys)
        assert len(redone[0].split_keys) == 1 and await hbase.count(table) == 0
    finally:
        await hbase.delete_table(table)


def test_cli_create_and_describe(hbase_settings: HBaseSettings, unique: str,
                                 tmp_path: Path) -> None:
    from pipeline.cli.tables import tables_app

    table = f"t_cli_{unique}"
    config = tmp_path / "profile.toml"
    config.write_text(
        f'[hbase]\nport = {hbase_settings.port}\nthrift2_port = {hbase_settings.thrift2_port}\n\n'
        f'[[tables]]\nname = "{table}"\nregions = 4\n[tables.families.d]\nversions = 2\n\n'
        f'[[routes]]\nname = "metrics"\ntopic = "metrics"\ntable = "{table}"\n'
        f'rowkey = "[ts % 4][long(ts)][host]"\ncolumns = {{ "d:v" = "value" }}\n')
    sample = tmp_path / "events.jsonl"
    sample.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in EVENTS))
    runner = CliRunner()
    try:
        result = runner.invoke(tables_app, ["create", "--config", str(config)],
                               env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert table in result.output and "created" in result.output
        assert "versions 2" in result.output
        result = runner.invoke(tables_app, ["describe", table, "--config", str(config)],
                               env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "4 regions" in result.output and "mod=3" in result.output
        result = runner.invoke(tables_app, ["create", "--config", str(config)],
                               env={"COLUMNS": "200"})
        assert "exists" in result.output
    finally:
        import anyio

        async def drop() -> None:
            async with HBaseClient(hbase_settings) as hb:
                await hb.delete_table(table)

        anyio.run(drop)
