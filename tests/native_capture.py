"""Capture the native client's exchanges with a real HBase, for the framing tests of
``tests/unit/native/test_captured.py``: ``python -m tests.native_capture DIR`` against the running local
stack (``hbase-ingest stack up``). It creates table ``native_capture`` (family ``d``, split at ``m``),
runs the exchanges below through :class:`~connectors.hbase.native.connection.RpcConnection` over a
stream that keeps every byte, drops the table, and writes to ``DIR``:

- ``NN-<name>.request``: the bytes the client sent for the call (``00-hello`` is the connection
  preamble and header), ``NN-<name>.response``: the frame the server answered with (4-byte length
  included);
- ``capture.json``: the HBase version, the ports, and per exchange its name and service.

The exchanges: the registry's ``GetMetaRegionLocations``; a meta scan of the table's regions; a
``Multi`` of three puts (explicit timestamps) into the region holding ``a``; the same with a family the
table does not have (each action refused with ``NoSuchColumnFamilyException``); a scan of the first
region; a ``Scan`` next on a scanner id the server never gave (a call-level
``UnknownScannerException``). Inputs are fixed, so re-encoding them gives the request bytes again;
region ids and start codes come from the server and differ per capture."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from connectors.hbase import HBaseClient
from connectors.hbase.native.connection import CLIENT_SERVICE, META_SERVICE, RpcConnection
from connectors.hbase.native.locate import meta_location, table_regions
from connectors.hbase.native.messages import scan_next, scan_open
from connectors.hbase.native.multi import build_multi, encode_batch
from connectors.hbase.native.wire import hello
from devstack import LocalStack
from devstack.layout import HBASE_VERSION
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.settings import FamilySpec, HBaseSettings

__all__ = ["CAPTURE_TABLE", "CAPTURE_USER", "capture_puts", "main"]

CAPTURE_TABLE = "native_capture"
CAPTURE_USER = "capture"
ORIGIN = Origin(TopicPartition("capture", 0), 0)


def capture_puts(family: bytes) -> list[Mutation]:
    """The three puts of the ``Multi`` exchanges (rows ``a1``..``a3``, two cells each, explicit timestamps)."""
    return [Mutation(CAPTURE_TABLE, b"a%d" % i, MutationKind.PUT,
                     {family + b":q": b"v%d" % i, family + b":n": i.to_bytes(8, "big")}, 1_700_000_000_000 + i, ORIGIN)
            for i in (1, 2, 3)]


class _Tee(anyio.abc.ByteStream):
    """A byte stream that keeps what goes through it."""

    def __init__(self, inner: anyio.abc.ByteStream) -> None:
        self.inner = inner
        self.sent = bytearray()
        self.received = bytearray()

    async def send(self, item: bytes) -> None:
        self.sent += item
        await self.inner.send(item)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self.inner.receive(max_bytes)
        self.received += data
        return data

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def extra_attributes(self) -> Any:
        return self.inner.extra_attributes


class _Recorder:
    """Connections over :class:`_Tee` streams, and the exchanges cut out of them."""

    def __init__(self, out: Path, tg: anyio.abc.TaskGroup) -> None:
        self.out = out
        self.tg = tg
        self.exchanges: list[dict[str, str]] = []

    async def connect(self, host: str, port: int, service: str) -> tuple[RpcConnection, _Tee]:
        tee = _Tee(await anyio.connect_tcp(host, port))
        await tee.send(hello(CAPTURE_USER, service))
        self._write(f"hello-{service}", bytes(tee.sent), b"", service)
        del tee.sent[:]
        conn = RpcConnection(host, port, service, tee)
        self.tg.start_soon(conn._read_loop)
        return conn, tee

    async def call(self, conn: RpcConnection, tee: _Tee, name: str, method: str, param: bytes,
                   cellblock: bytes = b"") -> None:
        try:
            await conn.call(method, param, cellblock, timeout_s=30)
        except Exception as e:  # an exception answer is one of the exchanges
            if not getattr(e, "java_class", None):
                raise
        self._write(name, bytes(tee.sent), bytes(tee.received), conn.service)
        del tee.sent[:], tee.received[:]

    def _write(self, name: str, request: bytes, response: bytes, service: str) -> None:
        stem = f"{len(self.exchanges):02d}-{name}"
        (self.out / f"{stem}.request").write_bytes(request)
        if response:
            (self.out / f"{stem}.response").write_bytes(response)
        self.exchanges.append({"file": stem, "service": service})


async def capture(stack: LocalStack, out: Path) -> None:
    settings = HBaseSettings(port=stack.settings.thrift_port, thrift2_port=stack.settings.thrift2_port)
    async with HBaseClient(settings) as hb:
        if await hb.table_exists(CAPTURE_TABLE):
            await hb.delete_table(CAPTURE_TABLE)
        await hb.create_table(CAPTURE_TABLE, {"d": FamilySpec()}, [b"m"])
        try:
            async with anyio.create_task_group() as tg:
                rec = _Recorder(out, tg)
                registry, rtee = await rec.connect("localhost", stack.settings.master_port, META_SERVICE)
                await rec.call(registry, rtee, "registry", "GetMetaRegionLocations", b"")
                meta = await meta_location(registry)  # the same call again, not kept
                conn, tee = await rec.connect(meta.host, meta.port, CLIENT_SERVICE)
                start, stop = f"{CAPTURE_TABLE},,".encode(), f"{CAPTURE_TABLE} ,,".encode()
                await rec.call(conn, tee, "meta-scan", "Scan",
                               scan_open(b"hbase:meta,,1", start, stop, [b"info"], 1000, limit=1000))
                first = (await table_regions(conn, CAPTURE_TABLE))[0]  # the same scan again, not kept
                del tee.sent[:], tee.received[:]
                for name, family in (("multi-puts", b"d"), ("multi-refused", b"x")):
                    puts = capture_puts(family)
                    await rec.call(conn, tee, name, "Multi",
                                   *build_multi([(first, [0, 1, 2])], encode_batch(puts, [None] * 3)))
                await rec.call(conn, tee, "region-scan", "Scan", scan_open(first.name, b"", b"", [b"d"], 10, limit=10))
                await rec.call(conn, tee, "unknown-scanner", "Scan", scan_next(987_654_321, 10))
                await registry.close()
                await conn.close()
        finally:
            await hb.delete_table(CAPTURE_TABLE)
    manifest = {"hbase": HBASE_VERSION, "master_port": stack.settings.master_port,
                "regionserver_port": stack.settings.regionserver_port, "user": CAPTURE_USER,
                "table": CAPTURE_TABLE, "exchanges": rec.exchanges}
    (out / "capture.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else Path("tests/unit/native/captured")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.re*"):
        old.unlink()
    anyio.run(capture, LocalStack(), out)
    sys.stdout.write(f"captured {len(list(out.glob('*.re*')))} files in {out}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
