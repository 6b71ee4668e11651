"""The general routing path (pipeline.core.routes.reference): record metadata as fields, tombstones, Debezium
change events, the flattened form's deleted flag and null rules."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from connectors.memory import MemoryHBase
from pipeline.core.model import MutationKind, TopicPartition
from pipeline.core.routes.reference import SNAPSHOT_TS
from pipeline.core.routes.router import Router
from pipeline.errors import ConfigError, EventError
from pipeline.settings import RouteSpec, TopicSpec, load_settings
from tests.unit.core.routing_support import route_all

TP = TopicPartition("t", 3)


@dataclass
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int = 1_000
    headers: tuple[tuple[str, bytes], ...] = ()


def route(**kw: Any) -> RouteSpec:
    base: dict[str, Any] = {"name": "r", "topic": "t", "table": "tb", "rowkey": "[id]", "columns": {"d:v": "v"}}
    base.update(kw)
    return RouteSpec.model_validate(base)


def router(*routes: RouteSpec, key_format: str = "text") -> Router:
    return Router(list(routes), topics=[TopicSpec(name="t", key_format=key_format)])


def muts(r: Router, *recs: Rec) -> tuple[list[Any], list[int] | None, EventError | None]:
    """The mutations, each record's count, and the first refusal (None: none)."""
    mutations, counts, refused = route_all(r, TP, list(recs))
    return mutations, counts, refused[0][2] if refused else None


def dbz(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int = 100) -> bytes:
    return orjson.dumps({"op": op, "before": before, "after": after,
                         "source": {"lsn": lsn, "ts_ms": 5, "txId": 9}, "ts_ms": 6})


# -- metadata fields ------------------------------------------------------------------------------


def test_key_headers_timestamp_and_position_are_fields() -> None:
    r = router(route(rowkey="[$key.id][_][$header.tenant]", timestamp_field="$timestamp",
                     columns={"d:v": "v", "d:o": {"field": "$offset", "encoding": "long"}, "d:p": "$partition",
                              "d:t": "$topic"}), key_format="json")
    (m,), counts, err = muts(r, Rec(7, b'{"v": "x"}', key=b'{"id": "k1"}', timestamp=1234,
                                    headers=(("tenant", b"acme"), ("tenant", b"later"))))
    assert err is None and counts == [1]
    assert m.row == b"k1_later"  # the last header of a name wins
    assert m.timestamp == 1234
    assert m.cells == {b"d:v": b"x", b"d:o": struct.pack(">q", 7), b"d:p": b"3", b"d:t": b"t"}


def test_a_connect_envelope_is_unwrapped_for_keys_and_values() -> None:
    r = router(route(rowkey="[$key.id]"), key_format="json")
    (m,), _, err = muts(r, Rec(0, b'{"schema": {"type": "struct"}, "payload": {"v": "x"}}',
                               key=b'{"schema": {}, "payload": {"id": 5}}'))
    assert err is None and m.row == b"5" and m.cells == {b"d:v": b"x"}


def test_an_undecodable_key_is_a_dead_letter_naming_the_key() -> None:
    r = router(route(rowkey="[$key.id]"), key_format="json")
    _, _, err = muts(r, Rec(0, b'{"v": 1}', key=b"not json"))
    assert err is not None and err.reason == "undecodable" and "key is not valid JSON" in str(err)


def test_an_unknown_metadata_name_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"'\$offsets' names no record metadata"):
        route(columns={"d:v": "$offsets"})
    with pytest.raises(ValueError, match=r"\$source"):
        route(timestamp_field="$source.lsn")  # only in a Debezium route
    with pytest.raises(ConfigError, match=r"rowkey field '\$foo.x' names no record metadata"):
        Router([route(rowkey="[$foo.x][_][id]")])
    with pytest.raises(ConfigError, match=r"rowkey field '\$source.lsn' names no record metadata"):
        Router([route(rowkey="[$source.lsn]")])  # only in a Debezium route
    assert Router([route(rowkey="[$key.id][$][id]", envelope="none")])  # '$' alone is a delimiter


def test_plain_topics_keep_the_generated_path() -> None:
    r = Router([route(timestamp_field="ts")])
    assert not r.general
    run = r.route_run(TP, [Rec(0, b'{"id": "a", "v": 1, "ts": 5}')], 0, 1)
    assert run.counts is None and run.mutations[0].cells == {b"d:v": b"1"}


# -- tombstones ---------------------------------------------------------------------------------


def test_tombstones_dead_letter_by_default_with_their_own_reason() -> None:
    _, counts, err = muts(router(route(rowkey="[$key]", columns={"d:v": "v"}, timestamp_field="$offset")),
                          Rec(0, b'{"v": 1}', key=b"a"), Rec(1, None, key=b"a"))
    assert counts == [1, 0] and err is not None and err.reason == "tombstone"


def test_tombstones_skipped_give_no_mutation_but_count() -> None:
    ms, counts, err = muts(router(route(rowkey="[$key]", on_tombstone="skip")), Rec(0, None, key=b"a"),
                           Rec(1, b'{"v": 2}', key=b"a"))
    assert err is None and counts == [0, 1] and len(ms) == 1


def test_a_tombstone_deletes_the_row_of_its_key_at_its_offset() -> None:
    r = router(route(rowkey="[$key]", on_tombstone="delete", timestamp_field="$offset",
                     columns={"d:v": "v", "e:w": "w"}))
    put, delete = muts(r, Rec(4, b'{"v": 1, "w": 2}', key=b"a"), Rec(9, None, key=b"a"))[0]
    assert put.kind is MutationKind.PUT and put.timestamp == 4
    assert delete.kind is MutationKind.DELETE and delete.row == b"a" and delete.timestamp == 9
    assert set(delete.cells) == {b"d", b"e"}  # the route's families, every version up to 9


def test_a_tombstone_delete_needs_metadata_only_keys_and_timestamps() -> None:
    with pytest.raises(ValueError, match="on_tombstone = 'delete' needs timestamp_field"):
        route(rowkey="[$key]", on_tombstone="delete", timestamp_field="ts")
    with pytest.raises(ConfigError, match="reads id"):
        Router([route(rowkey="[id]", on_tombstone="delete", timestamp_field="$offset")])


# -- Debezium -----------------------------------------------------------------------------------


def orders(key_format: str = "json") -> Router:
    cols = {"o:s": "seller_id", "o:a": {"field": "amount", "encoding": "long"}, "o:t": "status"}
    main = route(name="main", table="orders", rowkey="[order_id]", envelope="debezium", columns=cols)
    index = route(name="by_seller", table="by_seller", rowkey="[seller_id][_][order_id]", envelope="debezium",
                  columns={"o:t": "status"})
    return router(main, index, key_format=key_format)


def row(order_id: int, seller: str, status: str | None = "new") -> dict[str, Any]:
    return {"order_id": order_id, "seller_id": seller, "amount": 10, "status": status}


def test_a_create_writes_every_table_at_the_change_lsn() -> None:
    ms, counts, err = muts(orders(), Rec(0, dbz("c", None, row(1, "s1"), lsn=777)))
    assert err is None and counts == [2]
    assert [(m.table, m.row, m.kind, m.timestamp) for m in ms] == [
        ("orders", b"1", MutationKind.PUT, 777), ("by_seller", b"s1_1", MutationKind.PUT, 777)]


def test_an_update_that_moves_an_index_row_deletes_the_old_one_first() -> None:
    ms, counts, _ = muts(orders(), Rec(0, dbz("u", row(1, "s1"), row(1, "s2"), lsn=900)))
    assert counts == [3]
    assert [(m.table, m.row, m.kind, m.timestamp) for m in ms] == [
        ("orders", b"1", MutationKind.PUT, 900), ("by_seller", b"s1_1", MutationKind.DELETE, 900),
        ("by_seller", b"s2_1", MutationKind.PUT, 900)]
    assert set(ms[1].cells) == {b"o"}


def test_a_null_column_deletes_its_cell_in_a_debezium_route() -> None:
    ms, _, _ = muts(orders(), Rec(0, dbz("u", row(1, "s1"), row(1, "s1", status=None), lsn=50)))
    kinds = [(m.table, m.kind, sorted(m.cells)) for m in ms]
    assert kinds == [("orders", MutationKind.DELETE, [b"o:t"]), ("orders", MutationKind.PUT, [b"o:a", b"o:s"]),
                     ("by_seller", MutationKind.DELETE, [b"o:t"])]
    assert all(m.timestamp == 50 for m in ms)


def dbz_source(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int,
               snapshot: str = "false") -> bytes:
    return orjson.dumps({"op": op, "before": before, "after": after,
                         "source": {"lsn": lsn, "ts_ms": 5, "txId": 9, "snapshot": snapshot}, "ts_ms": 6})


def test_a_snapshot_read_sorts_below_every_streamed_change() -> None:
    ms, _, err = muts(orders(), Rec(0, dbz_source("r", None, row(111, "s06"), lsn=40835280, snapshot="true")))
    assert err is None and {m.timestamp for m in ms} == {SNAPSHOT_TS} == {0}
    # a route that stamps another field keeps it for snapshot reads too
    commit_time = router(route(name="main", table="orders", rowkey="[order_id]", envelope="debezium",
                               columns={"o:s": "seller_id"}, timestamp_field="$source.ts_ms"))
    (m,), _, _ = muts(commit_time, Rec(0, dbz_source("r", None, row(111, "s06"), lsn=40835280, snapshot="true")))
    assert m.timestamp == 5


async def test_a_transaction_in_flight_during_the_snapshot_leaves_no_stale_index_row() -> None:
    """Partition 3 of a real run: the snapshot read order 111 at its position (40835280); a transaction in
    flight during the snapshot had deleted it at 40834992 and re-inserted it for another seller, and was
    streamed after the snapshot. Stamped with the snapshot's position, the read's index row outlived its
    delete."""
    records = [dbz_source("r", None, row(111, "s06"), 40835280, snapshot="true"),
               dbz_source("d", row(111, "s06"), None, 40834992),
               dbz_source("c", None, row(111, "s30"), 40835280),
               dbz_source("d", row(111, "s30"), None, 40840944),
               dbz_source("c", None, row(111, "s28"), 40841056),
               dbz_source("u", row(111, "s28"), row(111, "s29"), 40857992),
               dbz_source("d", row(111, "s29"), None, 40871944)]
    ms, _, err = muts(orders(), *(Rec(i, v) for i, v in enumerate(records)))
    assert err is None
    hbase = MemoryHBase()
    for table in ("orders", "by_seller"):
        hbase.add_table(table, families=("o",))
    for m in ms:  # in topic order, one mutation per call
        await hbase.write(m.table, [m])
    assert await hbase.scan_page("by_seller", limit=10) == []
    assert await hbase.scan_page("orders", limit=10) == []


def test_a_delete_removes_the_rows_before_addresses() -> None:
    ms, _, _ = muts(orders(), Rec(0, dbz("d", row(1, "s1"), None, lsn=990)))
    assert [(m.table, m.row, m.kind, m.timestamp) for m in ms] == [
        ("orders", b"1", MutationKind.DELETE, 990), ("by_seller", b"s1_1", MutationKind.DELETE, 990)]


def test_without_a_before_image_an_index_route_cannot_find_the_old_row() -> None:
    key = b'{"order_id": 1}'
    ms, counts, err = muts(orders(), Rec(0, dbz("u", None, row(1, "s2")), key=key))
    # the main table (keyed on the primary key) takes the update; the index route alone refuses it
    assert counts == [1] and [m.table for m in ms] == ["orders"]
    assert err is not None and err.reason == "no_before_image"
    assert "REPLICA IDENTITY FULL" in str(err) and "seller_id" in str(err) and "by_seller" in str(err)
    # a before image without the index's field
    _, _, err = muts(orders(), Rec(0, dbz("d", {"order_id": 1}, None), key=key))
    assert err is not None and err.reason == "no_before_image"


def test_a_route_keyed_on_the_primary_key_needs_no_before_image() -> None:
    main = route(name="main", table="orders", rowkey="[order_id]", envelope="debezium", columns={"o:s": "seller_id"})
    key = b'{"order_id": 1}'
    ms, _, err = muts(router(main, key_format="json"), Rec(0, dbz("u", None, row(1, "s2"), lsn=3), key=key),
                      Rec(1, dbz("d", None, None, lsn=4), key=key))
    assert err is None
    assert [(m.row, m.kind, m.timestamp) for m in ms] == [(b"1", MutationKind.PUT, 3), (b"1", MutationKind.DELETE, 4)]


def test_a_key_only_route_deletes_from_the_key_when_before_is_missing() -> None:
    r = router(route(rowkey="[$key.order_id]", envelope="debezium", columns={"o:s": "seller_id"}), key_format="json")
    (m,), _, err = muts(r, Rec(0, dbz("d", None, None, lsn=5), key=b'{"order_id": 3}'))
    assert err is None and m.kind is MutationKind.DELETE and m.row == b"3" and m.timestamp == 5


def test_other_ops_and_debezium_tombstones() -> None:
    _, _, err = muts(orders(), Rec(0, dbz("t", None, None)))
    assert err is not None and err.reason == "unsupported_op"
    ms, counts, err = muts(orders(), Rec(0, None, key=b'{"order_id": 1}'))
    assert err is None and ms == [] and counts == [0]  # the delete event before it did the delete


def test_source_ts_ms_may_be_chosen_as_the_timestamp() -> None:
    r = router(route(rowkey="[order_id]", envelope="debezium", timestamp_field="$source.ts_ms",
                     columns={"o:s": "seller_id"}))
    (m,), _, _ = muts(r, Rec(0, dbz("c", None, row(1, "s1"))))
    assert m.timestamp == 5


def test_deleted_field_of_the_flattened_form() -> None:
    r = router(route(rowkey="[order_id]", deleted_field="__deleted", timestamp_field="__lsn",
                     columns={"o:s": "seller_id"}))
    ms, _, _ = muts(r, Rec(0, orjson.dumps(row(1, "s1") | {"__deleted": "false", "__lsn": 3})),
                    Rec(1, orjson.dumps(row(1, "s1") | {"__deleted": "true", "__lsn": 4})))
    assert [(m.kind, m.timestamp) for m in ms] == [(MutationKind.PUT, 3), (MutationKind.DELETE, 4)]


def test_delete_versions_latest_deletes_one_version() -> None:
    r = router(route(rowkey="[order_id]", envelope="debezium", delete_versions="latest", columns={"o:s": "seller_id"}))
    (m,), _, _ = muts(r, Rec(0, dbz("d", row(1, "s1"), None, lsn=8)))
    assert m.kind is MutationKind.DELETE_VERSION and m.timestamp == 8


def test_a_refused_record_gives_nothing_and_the_records_after_it_are_routed() -> None:
    ms, counts, err = muts(orders(), Rec(0, dbz("c", None, row(1, "s1"))), Rec(1, b"[1]"),
                           Rec(2, dbz("c", None, row(2, "s1"))))
    assert counts == [2, 0, 2] and len(ms) == 4 and err is not None and err.reason == "not_an_object"


def test_profiles_declare_topics() -> None:
    s = load_settings(None, topics=[{"name": "cdc.orders", "key_format": "json"}],
                      routes=[{"name": "r", "topic": "cdc.orders", "table": "t", "rowkey": "[$key.id]",
                               "envelope": "debezium", "columns": {"d:v": "v"}}])
    assert s.topic("cdc.orders").key_format == "json" and s.topic("other").key_format == "text"
    assert s.routes[0].cell_timestamp == "$source.lsn" and s.routes[0].tombstones == "skip"
    with pytest.raises(Exception, match="topic names must be unique"):
        load_settings(None, topics=[{"name": "a"}, {"name": "a"}])


# -- per-route outcomes and NULL keys -----------------------------------------------------------------


def buyers(null_key: str | None = None, on_route_error: str = "dead_letter_route") -> Router:
    main = route(name="main", table="orders", rowkey="[order_id]", envelope="debezium", columns={"o:b": "buyer_id"})
    extra = {"null_key": null_key} if null_key else {}
    index = route(name="by_buyer", table="by_buyer", rowkey="[buyer_id][_][order_id]", envelope="debezium",
                  columns={"o:t": "status"}, **extra)
    return Router([main, index], topics=[TopicSpec(name="t", key_format="json", on_route_error=on_route_error)])


def order(order_id: int, buyer: str | None) -> dict[str, Any]:
    return {"order_id": order_id, "buyer_id": buyer, "status": "new"}


def test_a_null_index_key_is_no_index_row_and_the_main_row_is_written() -> None:
    ms, counts, err = muts(buyers(), Rec(0, dbz("c", None, order(1, None))))
    assert err is None and counts == [1] and [(m.table, m.row) for m in ms] == [("orders", b"1")]


def test_an_update_to_and_from_null_moves_the_index_row_in_and_out() -> None:
    ms, _, err = muts(buyers(), Rec(0, dbz("u", order(1, "b1"), order(1, None), lsn=7)),
                      Rec(1, dbz("u", order(2, None), order(2, "b2"), lsn=8)),
                      Rec(2, dbz("d", order(3, None), None, lsn=9)))
    assert err is None
    assert [(m.row, m.kind, m.timestamp) for m in ms if m.table == "by_buyer"] == [
        (b"b1_1", MutationKind.DELETE, 7), (b"b2_2", MutationKind.PUT, 8)]
    assert [(m.row, m.kind) for m in ms if m.table == "orders"][-1] == (b"3", MutationKind.DELETE)


def test_a_route_that_refuses_costs_only_that_route() -> None:
    ms, counts, _ = muts(buyers(), Rec(0, dbz("c", None, order(1, "a_b"))))
    assert [m.table for m in ms] == ["orders"] and counts == [1]
    _, _, refused = route_all(buyers(), TP, [Rec(0, dbz("c", None, order(1, "a_b")))])
    assert [(off, name, e.reason) for off, name, e in refused] == [(0, "by_buyer", "contains_delimiter")]


def test_null_key_dead_letter_refuses_with_its_own_reason() -> None:
    _, _, refused = route_all(buyers("dead_letter"), TP, [Rec(0, dbz("c", None, order(1, None))),
                                                          Rec(1, dbz("d", order(2, None), None))])
    assert [(off, name, e.reason) for off, name, e in refused] == [(0, "by_buyer", "null_key"),
                                                                   (1, "by_buyer", "null_key")]
    assert "full replica identity" in str(refused[1][2])


def test_on_route_error_dead_letter_record_is_all_or_nothing() -> None:
    ms, counts, refused = route_all(buyers(on_route_error="dead_letter_record"), TP,
                                    [Rec(0, dbz("c", None, order(1, "a_b"))), Rec(1, dbz("c", None, order(2, "b")))])
    assert counts == [0, 2] and [m.row for m in ms] == [b"2", b"b_2"]
    assert [(off, name, e.reason) for off, name, e in refused] == [(0, None, "contains_delimiter")]
    assert "by_buyer" in str(refused[0][2])


def test_a_record_every_route_refuses_is_one_dead_letter_of_no_route() -> None:
    _, counts, refused = route_all(buyers(), TP, [Rec(0, dbz("t", None, None))])
    assert counts == [0] and [(off, name, e.reason) for off, name, e in refused] == [(0, None, "unsupported_op")]


def test_a_value_moving_across_the_delimiter_leaves_no_stale_and_no_missing_index_row() -> None:
    """s03 -> s_07: the index cannot hold the new row (a dead letter for its route), but the old one
    goes; s_07 -> s03: the old row was never written, the new one is."""
    r = orders()
    ms, counts, refused = route_all(r, TP, [Rec(0, dbz("u", row(1, "s03"), row(1, "s_07"), lsn=50)),
                                            Rec(1, dbz("u", row(2, "s_07"), row(2, "s03"), lsn=51)),
                                            Rec(2, dbz("d", row(3, "s_07"), None, lsn=52))])
    assert [(m.table, m.row, m.kind, m.timestamp) for m in ms if m.table == "by_seller"] == [
        ("by_seller", b"s03_1", MutationKind.DELETE, 50), ("by_seller", b"s03_2", MutationKind.PUT, 51)]
    assert [(off, name, e.reason) for off, name, e in refused] == [(0, "by_seller", "contains_delimiter")]
    assert counts == [2, 2, 1]  # the main table takes all three; the delete of s_07's row deletes nothing
