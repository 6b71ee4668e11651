"""Writer schemas fetched before a fetch is routed: the async half of the registry formats.

Contract of :meth:`SchemaFetcher.prepare`: after it returns True, every schema id that the framed
values (and keys, when a route reads ``$key``) of the records handed in name is in the router's
:class:`~pipeline.core.records.schemas.SchemaCache`, compiled, or remembered as unknown (an id the registry
answered 404 for: its records become ``unknown_schema`` dead letters). While the registry does not
answer, it waits and retries with backoff (full jitter, 0.2 s to 10 s; one ``registry_unavailable``
warning per 30 s), the records unrouted and unacknowledged: nothing is committed past them. A stop
request ends the wait (False: the caller leaves the records for the next run). Any other registry
error (credentials refused, an answer that is not a schema) is raised: the worker stops, naming it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import anyio
import structlog

from pipeline.core.backoff import Backoff
from pipeline.core.model import TopicPartition
from pipeline.core.records.wire import framed_ids
from pipeline.core.routes.router import Record, Router
from pipeline.errors import RegistryError, SchemaNotFound
from pipeline.ports import SchemaRegistry

__all__ = ["SchemaFetcher"]

log = structlog.get_logger("hbase_ingest.worker")
_LOG_INTERVAL_S = 30.0


class SchemaFetcher:
    """Fills ``router.schemas`` from ``registry`` (module docstring). ``stop`` is set when a stop is
    requested; ``on_wait`` is told what is awaited (None once the registry answers), for ``/readyz``."""

    def __init__(self, router: Router, registry: SchemaRegistry, stop: anyio.Event,
                 on_wait: Callable[[str | None], None] = lambda _: None) -> None:
        self.router = router
        self.registry = registry
        self.stop = stop
        self.on_wait = on_wait
        self.fetched = 0
        self.unknown = 0
        self._backoff = Backoff(200, 10_000)

    def __repr__(self) -> str:
        return f"SchemaFetcher({self.registry.url}, {self.router.schemas!r}, fetched={self.fetched})"

    async def prepare(self, tp: TopicPartition, records: Sequence[Record]) -> bool:
        values, keys = self.router.framed(tp.topic)
        if not (values or keys):
            return True
        ids = framed_ids(r.value for r in records) if values else set()
        if keys:
            ids |= framed_ids(r.key for r in records)
        cache = self.router.schemas
        missing = cache.missing(ids)
        if not missing:
            return True
        cache.trim(keep=ids)
        for ident in missing:
            if not await self._fetch(ident):
                return False
        return True

    async def _fetch(self, ident: int) -> bool:
        cache, attempt, started, last_log = self.router.schemas, 0, time.monotonic(), None
        while True:
            try:
                schema = await self.registry.schema(ident)
            except SchemaNotFound as exc:
                cache.add_unknown(ident, str(exc))
                self.unknown += 1
                log.warning("schema_unknown", schema_id=ident, registry=self.registry.url, error=str(exc))
                break
            except RegistryError as exc:
                if not exc.retryable:
                    raise
                now = time.monotonic()
                self.on_wait(f"waiting for the schema registry at {self.registry.url}: {exc}")
                if last_log is None or now - last_log >= _LOG_INTERVAL_S:
                    last_log = now
                    log.warning("registry_unavailable", schema_id=ident, attempts=attempt + 1,
                                waited_s=round(now - started, 1), error=str(exc))
                with anyio.move_on_after(self._backoff.delay_ms(attempt, random.random()) / 1000):
                    await self.stop.wait()
                if self.stop.is_set():
                    return False
                attempt += 1
                continue
            compiled = cache.add(schema)
            self.fetched += 1
            log.info("schema_fetched", schema_id=ident, schema_type=schema.schema_type, name=compiled.name,
                     problem=compiled.problem)
            break
        if attempt:
            log.info("registry_reachable", attempts=attempt + 1, waited_s=round(time.monotonic() - started, 1))
            self.on_wait(None)
        return True
