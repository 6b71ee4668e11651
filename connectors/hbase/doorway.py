"""The doorways to HBase over one or several Thrift gateways: every call of
:class:`~connectors.hbase.client.HBaseClient` goes through :meth:`GatewayCalls.call` (Thrift1,
happybase), :meth:`GatewayCalls.call2` (Thrift2) or the DDL doorway, which choose a healthy gateway,
run the call in a worker thread holding one of its pooled connections, translate its errors, and fail
over to another gateway when that is safe (the contract is in :mod:`connectors.hbase.client`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

import anyio
import anyio.to_thread
import happybase
import structlog

from connectors.hbase.errors import is_gateway_failure, is_stale_connection, map_exceptions
from connectors.hbase.gateways import GatewayBoard
from connectors.hbase.native import NativeClient
from connectors.hbase.pool import ConnectionPool
from connectors.hbase.probe import Prober, probe_gateway
from connectors.hbase.putwire import direct_puts
from connectors.hbase.sasl import KerberosLogin
from connectors.hbase.scanprocs import Gateway
from connectors.hbase.thrift2 import load_idl
from connectors.hbase.transport import rpc_tls_context
from pipeline.errors import HBaseError, HBaseUnavailable
from pipeline.settings import GatewaySpec, HBaseSettings

__all__ = ["GatewayCalls"]

T = TypeVar("T")
log = structlog.get_logger("hbase_ingest.hbase")


class _Endpoint:
    """One gateway's connection pools (Thrift1 and Thrift2) and the limiters that bound its calls."""

    def __init__(self, spec: GatewaySpec, s: HBaseSettings) -> None:
        self.spec = spec
        self.gateway = gw = Gateway.of(spec, s)
        self.ddl = Gateway.of(spec, s, s.ddl_timeout_ms)  # a DDL call (a table create, a split) may take minutes
        self.t1: ConnectionPool[happybase.Connection] = ConnectionPool(
            s.pool_size, gw.thrift1, lambda c: c.close(), name=f"thrift1 {spec.name}")
        self.t2: ConnectionPool[Any] = ConnectionPool(
            s.pool_size, gw.thrift2, lambda c: c.close(), name=f"thrift2 {spec.host}:{spec.thrift2_port}")
        self.limit1 = anyio.CapacityLimiter(s.pool_size)
        self.limit2 = anyio.CapacityLimiter(s.pool_size)

    def discard_idle(self) -> None:
        """Close both pools' idle connections."""
        self.t1.discard_idle()
        self.t2.discard_idle()

    def close(self) -> None:
        self.t1.close()
        self.t2.close()


class _Sent:
    """Set once a call's connection is open: from then on its request may have reached HBase."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


class GatewayCalls:
    """The doorways over one or several gateways (module docstring); :class:`~connectors.hbase.client.HBaseClient`
    builds HBase's calls on them."""

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings
        s = settings
        self._prefix = s.table_prefix
        specs = s.endpoints()
        self._endpoints = [_Endpoint(spec, s) for spec in specs]
        self._board = GatewayBoard([(spec.name, spec.server) for spec in specs])
        self._prober = Prober(self._board, lambda i: probe_gateway(specs[i], s), s.probe_interval_ms / 1000)
        # puts are encoded straight to bytes on the binary protocol (connectors.hbase.putwire)
        self._direct_puts = direct_puts(s)
        # client = "native": puts, deletes and region lists over HBase's own RPC (connectors.hbase.native)
        self._native = (NativeClient(s.master_addresses(), zookeeper_quorum=s.zookeeper_quorum,
                                     zookeeper_parent=s.zookeeper_parent, table_prefix=s.table_prefix,
                                     timeout_s=s.timeout_ms / 1000,
                                     connect_timeout_s=min(s.timeout_ms / 1000, 10.0),
                                     kerberos=KerberosLogin.of(s), tls=rpc_tls_context(s))
                        if s.client == "native" else None)

    def __repr__(self) -> str:
        return f"HBaseClient({self._board!r})"

    async def __aenter__(self) -> Self:
        # the Thrift2 IDL is needed by every write: a missing one is a setup error, raised here
        # (ConfigError) rather than at the first write, where it would look like an outage
        await anyio.to_thread.run_sync(load_idl)
        if self._native is not None:
            await self._native.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        if self._native is not None:
            await self._native.__aexit__(None, None, None)

    async def aclose(self) -> None:
        self._prober.close()
        for ep in self._endpoints:
            ep.close()
        if self._native is not None:
            await self._native.close()

    @property
    def pool_size(self) -> int:
        """Connections per gateway: how many calls usefully run at once."""
        return self.settings.pool_size

    def statistics(self) -> dict[str, Any]:
        """``gateways``: per gateway name (``host:port``), its state (``up``/``down``), calls, errors,
        failovers, last error and pools; ``thrift1``/``thrift2``: the pools summed over gateways."""
        gateways = self._board.snapshot()
        for ep in self._endpoints:
            gateways[ep.spec.name] |= {"thrift1": ep.t1.statistics(), "thrift2": ep.t2.statistics()}

        def total(pool: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for g in gateways.values():
                for k, v in g[pool].items():
                    out[k] = out.get(k, 0) + v
            return out
        out = {"thrift1": total("thrift1"), "thrift2": total("thrift2"), "gateways": gateways,
               "threads_busy": sum(ep.limit1.borrowed_tokens + ep.limit2.borrowed_tokens for ep in self._endpoints)}
        if self._native is not None:
            out["native"] = self._native.statistics()
        return out

    def _name(self, table: str) -> str:
        return self._prefix + table

    # -- the doorways ----------------------------------------------------------------------------

    async def _on_gateway(self, use: Callable[[_Endpoint, _Sent], Awaitable[T]], *, idempotent: bool,
                          table: str | None, what: str, server: str | None = None,
                          served: list[str] | None = None) -> T:
        """``use(endpoint, sent)`` on a healthy gateway (``server``: the region server the call is
        for, for locality), retried once on another after a connection-level failure when safe
        (module docstring). ``served``: the name of the gateway that answered is appended to it."""
        tried: list[int] = []
        renewed: list[int] = []
        while True:
            i = self._board.choose(server, exclude=tried)
            if i is None:
                raise self._none_up(table, what, tried)
            sent = _Sent()
            self._board.started(i)
            try:
                result = await use(self._endpoints[i], sent)
            except HBaseError as exc:
                self._board.finished(i, str(exc))
                if not is_gateway_failure(exc):
                    raise
                if is_stale_connection(exc) and i not in renewed and (idempotent or not sent.sent):
                    # a pooled socket found closed: its idle siblings are suspect, the gateway is not yet
                    renewed.append(i)
                    self._endpoints[i].discard_idle()
                    log.info("stale_connection", gateway=self._board.name(i), what=what, table=table,
                             error=str(exc))
                    continue
                self._mark_down(i, exc)
                tried.append(i)
                if len(tried) > 1 or not (idempotent or not sent.sent) or not self._board.any_up(tried):
                    raise
                self._board.failed_over(i)
                log.warning("gateway_failover", gateway=self._board.name(i), what=what, table=table,
                            error=str(exc))
                continue
            except BaseException:
                self._board.finished(i, "interrupted")
                raise
            self._board.finished(i)
            if served is not None:
                served.append(self._board.name(i))
            return result

    def _mark_down(self, i: int, exc: HBaseError) -> None:
        if self._board.mark_down(i, str(exc), time.monotonic()):
            log.warning("gateway_down", gateway=self._board.name(i), error=str(exc))
            self._endpoints[i].discard_idle()  # its idle sockets are as dead as the one that failed
        self._prober.wake()

    def _none_up(self, table: str | None, what: str, tried: list[int]) -> HBaseUnavailable:
        where = f"{what} on table {table!r}" if table else what
        names = ", ".join(self._board.name(i) for i in range(len(self._board)))
        last = self._board.snapshot()[self._board.name(tried[-1] if tried else 0)]["last_error"]
        return HBaseUnavailable(f"{where} failed: every HBase gateway is down ({names}); last error: {last}",
                                table=table)

    async def call(self, fn: Callable[[happybase.Connection], T], *, table: str | None = None,
                   what: str = "HBase call", idempotent: bool = False, server: str | None = None) -> T:
        """Run ``fn(connection)`` in a worker thread on a pooled Thrift1 (happybase) connection of a
        healthy gateway. ``idempotent``: ``fn`` may run twice (on another gateway after a
        connection-level failure); otherwise it is retried only when it could not have started."""
        return await self._pooled(lambda ep: (ep.t1, ep.limit1), fn, table, what, idempotent, server, None)

    async def call2(self, fn: Callable[[Any], T], *, table: str | None = None, what: str = "HBase call",
                    idempotent: bool = False, server: str | None = None, served: list[str] | None = None) -> T:
        """Run ``fn(client)`` in a worker thread on a pooled Thrift2 client (``idempotent``: as in
        :meth:`call`; ``served``: as in :meth:`_on_gateway`)."""
        return await self._pooled(lambda ep: (ep.t2, ep.limit2), fn, table, what, idempotent, server, served)

    async def _pooled(self, pick: Callable[[_Endpoint], tuple[ConnectionPool[Any], anyio.CapacityLimiter]],
                      fn: Callable[[Any], T], table: str | None, what: str, idempotent: bool,
                      server: str | None, served: list[str] | None) -> T:
        """``fn(connection)`` in a worker thread on a connection of the pool ``pick`` chooses of a
        healthy gateway, bounded by that pool's limiter."""
        timeout_s = self.settings.timeout_ms / 1000

        async def use(ep: _Endpoint, sent: _Sent) -> T:
            pool, limiter = pick(ep)

            def run() -> T:
                with map_exceptions(table, what), pool.connection(timeout_s=timeout_s) as conn:
                    sent.sent = True
                    return fn(conn)
            return await anyio.to_thread.run_sync(run, limiter=limiter)
        return await self._on_gateway(use, idempotent=idempotent, table=table, what=what, server=server,
                                      served=served)

    async def _ddl(self, fn: Callable[[Any, Any], T], table: str, what: str, idempotent: bool = False) -> T:
        async def use(ep: _Endpoint, sent: _Sent) -> T:
            def run() -> T:
                with map_exceptions(table, what):
                    client = ep.ddl.thrift2()
                    sent.sent = True
                    try:
                        return fn(client, load_idl())
                    finally:
                        client.close()
            return await anyio.to_thread.run_sync(run, limiter=ep.limit2)
        return await self._on_gateway(use, idempotent=idempotent, table=table, what=what)
