"""A source table of orders changed at random, and the change events Debezium's PostgreSQL connector
writes for it (JSON converter, schemas off): for tests of changelog routes without a database, and
the expected HBase content after them.

What the generator reproduces of Debezium's stream (as measured against PostgreSQL 15 and Debezium
3.x): every change carries ``source.lsn`` (increasing change by change) and ``source.ts_ms`` (the
transaction's commit time, shared by every change of a transaction), ``before`` is the full old row
(``REPLICA IDENTITY FULL``); a delete is followed by a tombstone of its key; a change of the primary
key is a delete of the old key (header ``__debezium.newkey``), its tombstone, then a create of the
new key (header ``__debezium.oldkey``) with the same ``lsn``. Transactions hold several changes,
among them deletes and re-inserts of one key.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.rowkey import compile_rowkey
from pipeline.settings import Settings, load_settings

from .worker_support import TEST_FETCH, writer_toml

Row = dict[str, Any]


@dataclass
class Change:
    key: bytes
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass
class SourceTable:
    """The orders table and its change stream."""

    seed: int
    rows: dict[int, Row] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    lsn: int = 20_000_000
    ts_ms: int = 1_760_000_000_000
    tx: int = 700
    next_id: int = 1
    ops: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _source(self) -> dict[str, Any]:
        self.lsn += 8 + self.rng.randrange(64)
        return {"version": "3.6.1.Final", "connector": "postgresql", "name": "shop", "ts_ms": self.ts_ms,
                "db": "shop", "schema": "public", "table": "orders", "txId": self.tx, "lsn": self.lsn}

    def _emit(self, op: str, before: Row | None, after: Row | None, key_id: int, source: dict[str, Any],
              headers: list[tuple[str, bytes]] | None = None) -> None:
        key = orjson.dumps({"order_id": key_id})
        value = {"before": before, "after": after, "source": source, "op": op, "ts_ms": self.ts_ms + 3,
                 "transaction": None}
        self.changes.append(Change(key, orjson.dumps(value), headers or []))
        if op == "d":
            self.changes.append(Change(key, None, headers or []))  # the tombstone
        self.ops[op] = self.ops.get(op, 0) + 1

    def _row(self, order_id: int) -> Row:
        r = self.rng
        return {"order_id": order_id, "seller_id": f"s{r.randrange(20):02d}", "buyer_id": f"b{r.randrange(50):03d}",
                "amount_cents": r.randrange(1, 10**6), "status": r.choice(["new", "paid", "sent", None])}

    def insert(self) -> None:
        oid = self.next_id
        self.next_id += 1
        self.rows[oid] = self._row(oid)
        self._emit("c", None, dict(self.rows[oid]), oid, self._source())

    def update_plain(self, oid: int) -> None:
        before = dict(self.rows[oid])
        self.rows[oid] |= {"status": self.rng.choice(["new", "paid", "sent", None]),
                           "amount_cents": self.rng.randrange(1, 10**6)}
        self._emit("u", before, dict(self.rows[oid]), oid, self._source())

    def update_indexed(self, oid: int) -> None:
        before = dict(self.rows[oid])
        self.rows[oid] |= {"seller_id": f"s{self.rng.randrange(20):02d}", "buyer_id": f"b{self.rng.randrange(50):03d}"}
        self._emit("u", before, dict(self.rows[oid]), oid, self._source())

    def update_key(self, oid: int) -> None:
        new = self.next_id
        self.next_id += 1
        before = self.rows.pop(oid)
        after = before | {"order_id": new}
        self.rows[new] = after
        source = self._source()
        self._emit("d", dict(before), None, oid, source, [("__debezium.newkey", orjson.dumps({"order_id": new}))])
        self._emit("c", None, dict(after), new, source, [("__debezium.oldkey", orjson.dumps({"order_id": oid}))])

    def delete(self, oid: int) -> None:
        before = self.rows.pop(oid)
        self._emit("d", dict(before), None, oid, self._source())

    def reinsert(self, oid: int) -> None:
        """A delete and a re-insert of one key in one transaction (one commit time)."""
        self.delete(oid)
        self.rows[oid] = self._row(oid)
        self._emit("c", None, dict(self.rows[oid]), oid, self._source())

    def run(self, operations: int) -> None:
        """About ``operations`` changes in transactions of 1-5 changes."""
        r = self.rng
        while sum(self.ops.values()) < operations:
            self.tx += 1
            self.ts_ms += r.randrange(0, 3)  # transactions often share a millisecond
            for _ in range(r.randrange(1, 6)):
                live = list(self.rows)
                pick = r.random()
                if not live or pick < 0.25:
                    self.insert()
                    continue
                oid = r.choice(live)
                if pick < 0.50:
                    self.update_plain(oid)
                elif pick < 0.65:
                    self.update_indexed(oid)
                elif pick < 0.72:
                    self.update_key(oid)
                elif pick < 0.87:
                    self.delete(oid)
                else:
                    self.reinsert(oid)


def cdc_settings(unique: str, topic: str | None = None, **writer: Any) -> Settings:
    """Orders into a main table, two index tables and a table of every column (dynamic columns), from
    Debezium's change events on ``topic``
    (default: a topic of the test's own). The seller index's ``[seller_id][_]`` refuses a seller
    holding ``_`` (``contains_delimiter``, that route only); the buyer index's escaped text takes any
    buyer, and a NULL buyer has no row there (``null_key = "skip"``, a Debezium route's default)."""
    topic = topic or f"shop.public.orders-{unique}"
    fam = {"o": {"versions": 5}}
    main = {"name": "orders", "topic": topic, "table": f"orders_{unique}", "envelope": "debezium",
            "rowkey": "[long(order_id)]",
            "columns": {"o:s": "seller_id", "o:b": "buyer_id", "o:a": {"field": "amount_cents", "encoding": "long"},
                        "o:t": "status"}}
    by_seller = {"name": "by_seller", "topic": topic, "table": f"by_seller_{unique}", "envelope": "debezium",
                 "rowkey": "[seller_id][_][long(order_id)]", "columns": {"o:b": "buyer_id", "o:t": "status"}}
    by_buyer = {"name": "by_buyer", "topic": topic, "table": f"by_buyer_{unique}", "envelope": "debezium",
                "rowkey": "[text(buyer_id, escaped)][long(order_id)]",
                "columns": {"o:a": {"field": "amount_cents", "encoding": "long"}}}
    # every column of the row as a cell ("o:order_id", "o:buyer_id"...): a column that becomes NULL deletes its cell
    everything = {"name": "orders_all", "topic": topic, "table": f"orders_all_{unique}", "envelope": "debezium",
                  "rowkey": "[long(order_id)]", "columns": {"o:*": {"field": "$value", "exclude": ["updated_at"]}}}
    routes = [main, by_seller, by_buyer, everything]
    w = {"max_batch_rows": 200, "max_batch_age_ms": 50, "commit_interval_ms": 200, "concurrency": 4}
    w.update(writer)
    return load_settings(None, topics=[{"name": topic, "key_format": "json"}], routes=routes,
                         tables=[{"name": r["table"], "families": fam} for r in routes], writer=w,
                         kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}",
                                "max_poll_records": 500, **TEST_FETCH})


def profile_toml(settings: Settings) -> str:
    """A TOML profile equivalent to ``settings`` from :func:`cdc_settings` (for worker subprocesses)."""
    k, w = settings.kafka, settings.writer
    out = [f'[kafka]\ngroup_id = "{k.group_id}"\ndead_letter_topic = "{k.dead_letter_topic}"\n'
           f"max_poll_records = {k.max_poll_records}\nfetch_max_wait_ms = {k.fetch_max_wait_ms}\n",
           writer_toml(w)]
    out += [f'[[topics]]\nname = "{t.name}"\nkey_format = "{t.key_format}"\n' for t in settings.topics]
    out += [f'[[tables]]\nname = "{t.name}"\nfamilies = {{ o = {{ versions = 5 }} }}\n' for t in settings.tables]
    for r in settings.routes:
        cols = ", ".join(f'"{c}" = {{ field = "{s.field}", encoding = "{s.encoding}" }}' for c, s in r.columns.items())
        dynamic = ", ".join(f'"{c}" = {{ field = "{d.field}", exclude = {orjson.dumps(d.exclude).decode()} }}'
                            for c, d in r.dynamic_columns.items())
        cols = ", ".join(part for part in (cols, dynamic) if part)
        out.append(f'[[routes]]\nname = "{r.name}"\ntopic = "{r.topic}"\ntable = "{r.table}"\n'
                   f'envelope = "{r.envelope}"\nrowkey = "{r.rowkey}"\ncolumns = {{ {cols} }}\n')
    return "\n".join(out)


def expected_tables(settings: Settings, rows: dict[int, Row]) -> dict[str, dict[bytes, dict[bytes, bytes]]]:
    """table -> row -> cells the source rows should be in HBase, by the routes' semantics: a NULL column
    has no cell; no seller-index row for a seller holding the delimiter ``_`` (that route refuses the
    record); no buyer-index row for a NULL buyer (``null_key = "skip"``); every column but ``updated_at``
    in the table of every column, a bigint as a long. Rowkeys are built by the
    project's own encoder from each route's design."""
    t = {r.name: r.table for r in settings.routes}
    key = {r.name: compile_rowkey(r.rowkey).build for r in settings.routes}
    out: dict[str, dict[bytes, dict[bytes, bytes]]] = {table: {} for table in t.values()}
    for row in rows.values():
        seller, buyer, status = row["seller_id"], row["buyer_id"], row["status"]
        amount = struct.pack(">q", row["amount_cents"])
        out[t["orders"]][key["orders"](row)] = _cells({b"o:s": seller, b"o:b": buyer, b"o:a": amount, b"o:t": status})
        if seller is not None and "_" not in seller:
            out[t["by_seller"]][key["by_seller"](row)] = _cells({b"o:b": buyer, b"o:t": status})
        if buyer is not None:
            out[t["by_buyer"]][key["by_buyer"](row)] = {b"o:a": amount}
        out[t["orders_all"]][key["orders_all"](row)] = _cells({
            b"o:order_id": struct.pack(">q", row["order_id"]), b"o:seller_id": seller, b"o:buyer_id": buyer,
            b"o:amount_cents": amount, b"o:status": status})
    # a row whose every cell is null has no cells, and HBase has no row without cells
    return {table: {k: v for k, v in rows_.items() if v} for table, rows_ in out.items()}


def _cells(values: dict[bytes, str | bytes | None]) -> dict[bytes, bytes]:
    """The cells of the values that are not NULL (a Debezium route deletes a column that becomes NULL)."""
    return {c: v.encode() if isinstance(v, str) else v for c, v in values.items() if v is not None}
