"""``NativeClient``: writes batches of mutations straight to the region servers over HBase's native
RPC (no Thrift gateway), and scans rows (forward or reversed, bounded to columns; :meth:`NativeClient.scan`).

Bootstrap: the first master in ``masters`` (``host:port`` of its RPC port, 16000 by default) that
answers ``ClientMetaService.GetMetaRegionLocations`` names the meta region's server; when none does
(or none is given), the ``meta-region-server`` znode read from ``zookeeper_quorum``
(:mod:`connectors.hbase.native.zookeeper`) names it. A table's
regions come from a meta scan and are kept in a :class:`~connectors.hbase.native.regions.RegionCache`.
One :class:`~connectors.hbase.native.connection.RpcConnection` per server and service is opened on
first use and reopened after it closed; with ``kerberos`` each one logs in (SASL GSSAPI with its QOP,
:mod:`connectors.hbase.native.login`) to ``<service>/<host>`` of the host it connects to, masters and
region servers alike, and a refused login raises :class:`~pipeline.errors.HBaseAuthError` at once (no
retry: every server would refuse it).

:meth:`NativeClient.write` groups a batch by region, sends one ``Multi`` per region server (all of
them concurrently; one ``RegionAction`` per region, cells in a cellblock after the protobuf) and
decodes the answers. A server's part larger than ``max_request_bytes`` goes as several ``Multi``
calls, cut in request order; a single mutation larger than that fails at once (``request-too-large``).
Failed actions are retried, and only those: after a relocation
(``NotServingRegionException``, ``RegionMovedException``, a lost connection, a region without a
server) the table's regions are re-read from meta first; after a busy answer the client only waits.
Waits grow from ``backoff_s`` by doubling up to ``max_backoff_s``; after ``retries`` retries, or at
once for a failure no retry can fix, the call raises (:func:`~connectors.hbase.native.failures.error_for`:
the error names the table, the region and the Java exception, and carries ``failures``).
Puts and deletes with explicit timestamps are idempotent, so a retry after a lost answer is safe.
Increments carry nonces (:func:`increment_nonce`) in the client's nonce group (random, drawn when the
client is made): the server applies an increment once however often it is sent with the same pair, so
retries inside :meth:`NativeClient.write` and a caller's retry of the same batch with the same client
never count twice. A new client (a restarted worker) has a new group: a replay counts again.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import ssl
import struct
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Self

import anyio
import anyio.abc

from connectors.hbase.native.connection import CLIENT_SERVICE, META_SERVICE, RpcConnection
from connectors.hbase.native.failures import (
    CONNECTION_LOST,
    META_UNREADABLE,
    REQUEST_TOO_LARGE,
    UNASSIGNED,
    Failed,
    error_for,
)
from connectors.hbase.native.locate import ScannedRow, meta_location, scan_region, table_regions
from connectors.hbase.native.messages import ServerName
from connectors.hbase.native.multi import (
    COMPILED,
    Encoded,
    Group,
    build_multi,
    encode_batch,
    encode_plain_puts,
    halves,
    multi_failures,
)
from connectors.hbase.native.regions import META_REGION, Region, RegionCache
from connectors.hbase.native.zookeeper import meta_from_zookeeper
from connectors.hbase.sasl import Login
from pipeline.core.model import Mutation, MutationKind
from pipeline.errors import (
    HBaseAuthError,
    HBaseError,
    HBaseRequestError,
    HBaseTimeout,
    HBaseUnavailable,
    RegionMapStale,
)

__all__ = ["MAX_REQUEST_BYTES", "NativeClient", "increment_nonce"]

#: the largest request (MultiRequest + cellblock) sent by default: a quarter of the servers' own
#: default limit (``hbase.ipc.max.request.size``, 256 MiB), over which a server drops the connection
MAX_REQUEST_BYTES = 64 << 20

#: a scanner the server no longer knows (its lease expired, its region closed, a call out of order):
#: the scan opens a new one on the region
_SCANNER_LOST = frozenset({
    "org.apache.hadoop.hbase.UnknownScannerException",
    "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException",
    "org.apache.hadoop.hbase.exceptions.ScannerResetException",
})


def increment_nonce(m: Mutation, occurrence: int = 0) -> int:
    """An increment's nonce (1 .. 2**63 - 1): a hash of where it came from (topic, partition, offset),
    its table, row, column and amount, and ``occurrence``, its rank among the increments of the same
    batch that agree on all of those (two routes counting one event into one cell). The same mutation
    in a batch sent again has the same nonce. Written again alone (a refused batch isolated row by row)
    such a twin's rank is 0 again, and the server takes it for its first: that corner is not covered."""
    o = m.origin
    key = b"\0".join((o.tp.topic.encode(), b"%d" % o.tp.partition, b"%d" % o.offset, m.table.encode(), m.row,
                      next(iter(m.cells), b""), b"%d" % m.amount, b"%d" % occurrence))
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % ((1 << 63) - 1) + 1


def _occurrences(mutations: Sequence[Mutation]) -> Iterator[int | None]:
    """Per mutation, None for other than an increment, else its rank among the batch's increments of the
    same origin, table, row, column and amount (0 for the first)."""
    seen: dict[tuple[object, ...], int] = {}
    for m in mutations:
        if m.kind is not MutationKind.INCREMENT:
            yield None
            continue
        key = (m.origin, m.table, m.row, next(iter(m.cells), b""), m.amount)
        seen[key] = rank = seen.get(key, -1) + 1
        yield rank

def _scan_goes_on(region: Region, stop: bytes, reverse: bool) -> bool:
    """Whether a scan that read ``region`` to its end has rows to read beyond it before ``stop``."""
    if reverse:
        return bool(region.start_key) and (not stop or region.start_key > stop)
    return bool(region.end_key) and (not stop or region.end_key < stop)


def _address(spec: str) -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected 'host:port', got {spec!r}")
    return host, int(port)


class _Batch:
    """One :meth:`NativeClient.write`'s mutations, and how each round's requests are encoded: a batch of
    plain puts straight from the mutations by the compiled encoder
    (:func:`~connectors.hbase.native.multi.encode_plain_puts`),
    anything else from encodings made once (:func:`~connectors.hbase.native.multi.encode_batch`, nonces
    included), so that a retry sends the same bytes."""

    __slots__ = ("_encoded", "mutations", "table")

    def __init__(self, table: str, mutations: Sequence[Mutation]) -> None:
        self.table = table
        self.mutations = mutations
        self._encoded: list[Encoded | None] | None = None

    def encoded(self) -> list[Encoded | None]:
        if self._encoded is None:
            nonces = [increment_nonce(m, k) if k is not None else None
                      for m, k in zip(self.mutations, _occurrences(self.mutations), strict=True)]
            try:
                self._encoded = encode_batch(self.mutations, nonces)
            except (ValueError, struct.error) as e:
                raise HBaseRequestError(f"cannot encode a mutation for table {self.table!r}: {e}",
                                        table=self.table) from e
        return self._encoded

    def request(self, groups: list[Group], nonce_group: int) -> tuple[list[Group], bytes, bytes]:
        """``(groups sent, MultiRequest, cellblock)`` for one server's ``groups``; positions whose mutation
        has nothing to send (a put without cells) are left out, and so are regions left with none."""
        if self._encoded is None and COMPILED:  # else the encodings made once serve every round
            plain = encode_plain_puts(groups, self.mutations)
            if plain is not None:
                return groups, *plain
        encoded = self.encoded()
        sent: list[Group] = [(region, kept) for region, positions in groups
                             if (kept := [i for i in positions if encoded[i] is not None])]
        return (sent, *build_multi(sent, encoded, nonce_group))


class NativeClient:
    """Async native HBase client (module docstring). Use as ``async with NativeClient([...]) as c``."""

    def __init__(self, masters: Sequence[str], *, zookeeper_quorum: Sequence[str] = (),
                 zookeeper_parent: str = "/hbase", table_prefix: str = "", timeout_s: float = 30.0,
                 connect_timeout_s: float = 10.0, retries: int = 5, backoff_s: float = 0.05,
                 max_backoff_s: float = 2.0, kerberos: Login | None = None,
                 max_request_bytes: int = MAX_REQUEST_BYTES, tls: ssl.SSLContext | None = None) -> None:
        if not masters and not zookeeper_quorum:
            raise ValueError("at least one master 'host:port' or ZooKeeper quorum member is needed")
        self._masters = [_address(m) for m in masters]
        self._quorum = list(zookeeper_quorum)
        self._zk_parent = zookeeper_parent
        self._prefix = table_prefix
        self._timeout = timeout_s
        self._connect_timeout = connect_timeout_s
        self._retries = retries
        self._backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._kerberos = kerberos
        self._max_request = max_request_bytes
        self._tls = tls
        self._conns: dict[tuple[str, int, str], RpcConnection] = {}
        self._conn_lock = anyio.Lock()
        self._exit = contextlib.AsyncExitStack()
        self._tg: anyio.abc.TaskGroup | None = None  # the connections' readers run in it, inside ``async with``
        self._meta: ServerName | None = None
        self._cache = RegionCache()
        self._nonce_group = secrets.randbits(63) + 1
        self._stats = {"multi_calls": 0, "actions_sent": 0, "actions_failed": 0, "retries": 0, "region_refreshes": 0}

    def __repr__(self) -> str:
        login = "" if self._kerberos is None else f"kerberos qop={self._kerberos.qop}, "
        return (f"NativeClient(masters={self._masters!r}, zookeeper={self._quorum!r}, {login}"
                f"connections={len(self._conns)}, {self._cache!r})")

    def statistics(self) -> dict[str, int]:
        """A snapshot of counters: ``multi_calls``, ``actions_sent`` (retries count again),
        ``actions_failed``, ``retries`` (rounds after the first) and ``region_refreshes`` (meta scans)."""
        return dict(self._stats)

    async def __aenter__(self) -> Self:
        self._tg = await self._exit.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
        self._tg = None
        await self._exit.aclose()  # the readers end as their connections close

    async def close(self) -> None:
        """Close every connection (the client stays usable inside ``async with``: they reopen on use)."""
        conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            await c.close()

    # -- connections and regions -------------------------------------------------------------------

    async def _connection(self, host: str, port: int, service: str) -> RpcConnection:
        key = (host, port, service)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        if self._tg is None:
            raise RuntimeError("NativeClient is used outside `async with NativeClient(...)`")
        async with self._conn_lock:
            conn = self._conns.get(key)
            if conn is None or conn.closed:
                conn = await RpcConnection.open(host, port, service, self._tg, timeout_s=self._connect_timeout,
                                                kerberos=self._kerberos, tls=self._tls)
                self._conns[key] = conn
            return conn

    async def _meta_server(self) -> ServerName:
        if self._meta is not None:
            return self._meta
        errors: list[HBaseError] = []
        for host, port in self._masters:
            try:
                registry = await self._connection(host, port, META_SERVICE)
                self._meta = await meta_location(registry, timeout_s=self._timeout)
            except HBaseAuthError:
                raise  # every server of the cluster would refuse the same login
            except HBaseError as e:
                errors.append(e)
                continue
            return self._meta
        if self._quorum:
            try:
                self._meta = await meta_from_zookeeper(self._quorum, self._zk_parent, timeout_s=self._connect_timeout)
            except HBaseUnavailable as e:
                errors.append(e)
            else:
                return self._meta
        raise HBaseUnavailable(f"neither the masters nor ZooKeeper could locate hbase:meta: "
                               f"{'; '.join(map(str, errors))}") from errors[-1]

    async def regions(self, table: str, *, refresh: bool = False) -> list[Region]:
        """``table``'s online regions sorted by start key (``table`` without the configured prefix),
        from the cache unless ``refresh`` or unknown. Raises :class:`~pipeline.errors.TableNotFound`."""
        name = self._prefix + table
        if not refresh and self._cache.known(name):
            return self._cache.regions(name)
        for attempt in (0, 1):
            meta = await self._meta_server()
            try:
                conn = await self._connection(meta.host, meta.port, CLIENT_SERVICE)
                regions = await table_regions(conn, name, timeout_s=self._timeout)
            except (HBaseUnavailable, HBaseTimeout, RegionMapStale):
                self._meta = None  # meta moved, or its server is down: ask the registry again
                if attempt:
                    raise
                continue
            self._stats["region_refreshes"] += 1
            self._cache.replace(name, regions)
            return self._cache.regions(name)
        raise AssertionError("unreachable")

    async def ping(self) -> None:
        """One round trip on the way writes are located: ``hbase:meta``'s server (named by the masters or
        ZooKeeper once, then remembered) asked for one row of meta. Raises what a write's meta re-read
        raises (:class:`~pipeline.errors.HBaseUnavailable`, ``HBaseTimeout``, ``HBaseAuthError``); a
        failure forgets meta's server, so that the next ping asks where it is again."""
        meta = await self._meta_server()
        try:
            conn = await self._connection(meta.host, meta.port, CLIENT_SERVICE)
            await scan_region(conn, META_REGION, limit=1, timeout_s=self._timeout)
        except (HBaseUnavailable, HBaseTimeout, RegionMapStale):
            self._meta = None
            raise

    # -- writes ------------------------------------------------------------------------------------

    async def write(self, table: str, mutations: Sequence[Mutation]) -> None:
        """Apply ``mutations`` (one table). Returns when HBase acknowledged every one; raises per the
        module docstring otherwise (a mutation that cannot be encoded raises
        :class:`~pipeline.errors.HBaseRequestError` before anything is sent)."""
        batch = _Batch(table, mutations)
        pending = list(range(len(mutations)))
        name = self._prefix + table
        refresh = False
        for attempt in range(self._retries + 1):
            try:
                if refresh or not self._cache.known(name):
                    await self.regions(table, refresh=True)
            except (HBaseUnavailable, HBaseTimeout, RegionMapStale) as e:
                # meta cannot be read for now (its server busy, moving, unreachable): a failed round,
                # waited out like the others, and the re-read tried again in the next one
                failures = [Failed(i, META_REGION, META_UNREADABLE, f"the regions of {table!r} could not be "
                                   f"re-read: {e}") for i in pending]
            else:
                failures = await self._send_all(name, pending, batch)
                if not failures:
                    return
            if any(not f.retryable for f in failures) or attempt == self._retries:
                raise error_for(table, failures, exhausted=attempt == self._retries)
            refresh = any(f.relocate for f in failures)
            self._stats["retries"] += 1
            pending = sorted({f.index for f in failures})
            await anyio.sleep(min(self._backoff * 2 ** attempt, self._max_backoff))
        raise AssertionError("unreachable")

    async def _send_all(self, name: str, pending: Sequence[int], batch: _Batch) -> list[Failed]:
        """One round: ``pending`` located, one request per server encoded (all before any is sent), sent
        side by side; the failed actions."""
        by_server: dict[tuple[str, int], list[Group]] = {}
        failures: list[Failed] = []
        found, holes = self._cache.group(name, batch.mutations, pending)
        failures += [Failed(i, b"", UNASSIGNED, "no online region holds the row") for i in holes]
        for region, positions in found:
            if not region.host:
                failures += [Failed(i, region.name, UNASSIGNED, "no online region holds the row") for i in positions]
            else:
                by_server.setdefault((region.host, region.port), []).append((region, positions))
        requests: list[tuple[str, int, list[Group], bytes, bytes]] = []
        for (host, port), groups in by_server.items():
            for part, param, cellblock in self._fitted(batch, groups, failures):
                requests.append((host, port, part, param, cellblock))
        if len(requests) == 1:  # a batch of one region server, as the writer makes them
            failures += await self._send(*requests[0])
        else:
            try:
                async with anyio.create_task_group() as tg:
                    for request in requests:
                        tg.start_soon(self._send_into, failures, *request)
            except BaseExceptionGroup as group:  # undecodable answers: HBaseError, not a group, for the caller
                errors = [e for e in group.exceptions if isinstance(e, HBaseError)]
                if len(errors) == len(group.exceptions):
                    raise errors[0] from group
                raise
        self._stats["actions_failed"] += len(failures)
        return failures

    def _fitted(self, batch: _Batch, groups: list[Group],
                failures: list[Failed]) -> Iterator[tuple[list[Group], bytes, bytes]]:
        """One server's ``groups`` as requests of at most ``max_request_bytes`` each (MultiRequest plus
        cellblock): halved in request order until each fits. A single mutation that does not fit is
        appended to ``failures`` (not retryable) and not sent."""
        sent, param, cellblock = batch.request(groups, self._nonce_group)
        size = len(param) + len(cellblock)
        if size <= self._max_request:
            yield sent, param, cellblock
            return
        if sum(len(positions) for _, positions in sent) == 1:
            [(region, [i])] = sent
            failures.append(Failed(i, region.name, REQUEST_TOO_LARGE, f"the mutation encodes to {size} bytes, "
                                   f"more than one request may carry ({self._max_request}, max_request_bytes)"))
            return
        for half in halves(sent):
            yield from self._fitted(batch, half, failures)

    async def _send_into(self, failures: list[Failed], host: str, port: int, groups: Sequence[Group],
                         param: bytes, cellblock: bytes) -> None:
        failures += await self._send(host, port, groups, param, cellblock)

    async def _send(self, host: str, port: int, groups: Sequence[Group], param: bytes,
                    cellblock: bytes) -> list[Failed]:
        """One ``Multi`` to one server; returns its failed actions (a connection-level failure fails all)."""
        if not groups:  # nothing of this server's part of the batch had anything to send
            return []
        self._stats["multi_calls"] += 1
        self._stats["actions_sent"] += sum(len(p) for _, p in groups)
        try:
            conn = await self._connection(host, port, CLIENT_SERVICE)
            reply = await conn.call("Multi", param, cellblock, timeout_s=self._timeout)
        except (HBaseUnavailable, HBaseTimeout, RegionMapStale, HBaseRequestError) as e:
            cls = getattr(e, "java_class", CONNECTION_LOST)
            why = getattr(e, "detail", str(e))  # a Java exception's class is the failure's own field
            return [Failed(i, region.name, cls, why) for region, positions in groups for i in positions]
        try:
            return multi_failures(groups, reply.param)
        except ValueError as e:
            raise HBaseError(f"undecodable Multi response from {host}:{port}: {e}") from e

    # -- reads -------------------------------------------------------------------------------------

    async def scan(self, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
                   reverse: bool = False, columns: Sequence[bytes] = ()) -> list[ScannedRow]:
        """At most ``limit`` rows of ``table`` as ``(row key, cells)``, every asked column's newest
        version: ``[start, stop)`` in ascending key order (``b""``: an open end), or with ``reverse``
        from ``start`` (inclusive; ``b""``: the last row) down to ``stop`` (exclusive), descending, as
        HBase's reversed scans go. ``columns``: ``b"family"`` or ``b"family:qualifier"`` names (none:
        every column).

        One region at a time, each through a scanner the server closes at the region's end or at the
        limit. A region that moved, a lost connection, a busy server or a lost scanner has that region
        read again from where its scan began (after a meta re-read when the region may have moved), with
        the writes' backoff and ``retries`` per region. A region's rows are kept once its scan completed,
        so a row is never returned twice."""
        name = self._prefix + table
        out: list[ScannedRow] = []
        key, inclusive = start, True  # where the next region's scanner starts
        failed = 0
        while len(out) < limit:
            try:
                region = await self._scan_region_of(table, name, key, inclusive, reverse)
                conn = await self._connection(region.host, region.port, CLIENT_SERVICE)
                rows = await scan_region(conn, region.name, key, stop, columns, limit - len(out),
                                         reversed_=reverse, include_start=inclusive, timeout_s=self._timeout)
            except HBaseError as e:
                cls = getattr(e, "java_class", CONNECTION_LOST)
                if not isinstance(e, (HBaseUnavailable, HBaseTimeout, RegionMapStale)) and cls not in _SCANNER_LOST:
                    raise
                if failed == self._retries:
                    raise type(e)(f"scan of table {table!r} from {key!r}: retries exhausted: {e}", table=table) from e
                failed += 1
                self._stats["retries"] += 1
                if isinstance(e, RegionMapStale) or cls == CONNECTION_LOST:
                    self._cache.forget(name)
                await anyio.sleep(min(self._backoff * 2 ** (failed - 1), self._max_backoff))
                continue
            failed = 0
            out += rows
            if len(out) >= limit or not _scan_goes_on(region, stop, reverse):
                break
            # the region is exhausted: the next one starts at its boundary
            key, inclusive = (region.start_key, False) if reverse else (region.end_key, True)
        return out[:limit]

    async def _scan_region_of(self, table: str, name: str, key: bytes, inclusive: bool, reverse: bool) -> Region:
        """The region a scan from ``key`` reads next, with its server; meta is re-read when the cache has
        none there. Raises :class:`~pipeline.errors.RegionMapStale` when meta has none either (a region
        in transition: the caller's retry waits for it)."""
        for refresh in (False, True):
            if refresh or not self._cache.known(name):
                await self.regions(table, refresh=True)
            if not reverse:
                region = self._cache.locate(name, key)
            elif inclusive:
                region = self._cache.locate(name, key) if key else self._cache.last(name)
            else:
                region = self._cache.before(name, key)
            if region is not None and region.host:
                return region
        raise RegionMapStale(f"no online region of table {table!r} holds the rows at {key!r}", table=table)
