"""One typed, validated, frozen configuration: a TOML profile (``config/*.toml``) overridden by
environment variables.

Environment overrides use the prefix ``HBASE_INGEST_`` and ``__`` between nesting levels, e.g.
``HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or ``HBASE_INGEST_WRITER__MAX_BATCH_ROWS=500``.
Lists (tables, routes) come from the TOML file only.

Every section forbids unknown keys: a misspelt key is an error that names it and lists the valid ones.
:func:`load_settings` turns pydantic's validation errors into one :class:`~pipeline.errors.ConfigError`
whose message names each bad key, what was expected and what was given.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pipeline.errors import ConfigError

__all__ = [
    "ColumnSpec",
    "CounterSpec",
    "FamilySpec",
    "HBaseSettings",
    "KafkaSettings",
    "MetricsSettings",
    "RouteSpec",
    "RuntimeSettings",
    "Settings",
    "StackSettings",
    "TableSpec",
    "WriterSettings",
    "load_settings",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    """Kafka client options. Security options are passed through to aiokafka unchanged."""

    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "hbase-ingest"
    group_id: str = "hbase-ingest"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    dead_letter_topic: str = "hbase-ingest.dead-letter"
    max_poll_records: int = Field(default=2000, ge=1)
    fetch_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    session_timeout_ms: int = Field(default=30_000, ge=1000)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    request_timeout_ms: int = Field(default=30_000, ge=1000)


class HBaseSettings(_Section):
    """The HBase Thrift gateways: Thrift1 (happybase, data) and Thrift2 (DDL with split keys)."""

    host: str = "127.0.0.1"
    port: int = Field(default=9090, ge=1, le=65535)
    thrift2_port: int = Field(default=9091, ge=1, le=65535)
    pool_size: int = Field(default=8, ge=1, le=256)
    timeout_ms: int = Field(default=30_000, ge=100, description="per-call timeout")
    ddl_timeout_ms: int = Field(default=120_000, ge=1000)
    transport: Literal["buffered", "framed"] = "buffered"
    protocol: Literal["binary", "compact"] = "binary"
    table_prefix: str = ""


class WriterSettings(_Section):
    """Per-region batching, concurrency, retries and the memory bound of the ingest worker."""

    max_batch_rows: int = Field(default=1000, ge=1)
    max_batch_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    max_batch_age_ms: int = Field(default=200, ge=1)
    concurrency: int = Field(default=8, ge=1, description="batches written at once")
    max_in_flight_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024,
        description="memory of mutations read but not yet acknowledged (Python object cost included); "
                    "fetching pauses at this bound and resumes below half of it")
    retry_initial_ms: int = Field(default=100, ge=1)
    retry_max_ms: int = Field(default=10_000, ge=1)
    retry_deadline_s: float | None = Field(default=None, description="None = retry forever")
    commit_interval_ms: int = Field(default=1000, ge=10)
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    max_key_bytes: int = Field(default=32767, ge=1, le=32767)
    max_cell_bytes: int = Field(default=10 * 1024 * 1024, ge=1)


class RuntimeSettings(_Section):
    """Process-wide tuning applied by the long-running commands (run, backfill, scan, demo)."""

    gc_threshold0: int = Field(
        default=50_000, ge=0,
        description="CPython generation-0 GC threshold, with the start-up heap frozen (0 = Python's defaults); "
                    "see pipeline.runtime.gctune")
    cpu_affinity: list[int] = Field(
        default_factory=list,
        description="CPUs the process may run on (empty = any); one CPU suits a process bound by its own "
                    "CPU, such as a big scan: see pipeline.runtime.affinity")


class MetricsSettings(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)
    skew_window_s: float = Field(default=60.0, gt=0)


class StackSettings(_Section):
    """The local stack started by ``hbase-ingest stack up``. Paths default to user cache/state dirs."""

    cache_dir: Path | None = None
    state_dir: Path | None = None
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    zookeeper_port: int = 2181
    master_port: int = 16000
    regionserver_port: int = 16020
    thrift_port: int = 9090
    thrift2_port: int = 9091
    kafka_heap_mb: int = Field(default=512, ge=128)
    hbase_heap_mb: int = Field(default=1024, ge=256)
    start_timeout_s: float = Field(default=180.0, gt=0)


class FamilySpec(_Section):
    versions: int = Field(default=1, ge=1)
    ttl_s: int | None = Field(default=None, ge=1)
    compression: Literal["NONE", "GZ", "SNAPPY", "LZ4", "ZSTD"] | None = None
    in_memory: bool = False


class TableSpec(_Section):
    name: str
    families: dict[str, FamilySpec] = Field(default_factory=lambda: {"d": FamilySpec()})
    regions: int | None = Field(default=None, ge=1, le=4096,
                                description="pre-split into this many regions (default: from the rowkey design)")


class ColumnSpec(_Section):
    """One cell of a route: value taken from ``field`` (a dotted path) and encoded as
    ``text`` (UTF-8; numbers in decimal), ``json`` (orjson of the value) or ``long`` (8-byte big-endian)."""

    field: str
    encoding: Literal["text", "json", "long"] = "text"
    required: bool = True


class CounterSpec(_Section):
    """Pre-aggregation on a counter cell ``column`` (``family:qualifier``).

    ``mode = "increment"``: an atomic HBase increment by ``amount`` (or the value of ``amount_field``).
    Not replay-safe: re-delivered events (after a crash or a backfill) are counted again.

    ``mode = "tally"``: replay-safe. Each event writes one cell in ``family`` whose qualifier is the
    event's identity (``id_field``, or topic/partition/offset when unset) and whose value is the amount;
    the count is the sum over the row's cells (the reader does that). A replay rewrites the same cells.
    """

    column: str
    mode: Literal["increment", "tally"] = "increment"
    amount: int = 1
    amount_field: str | None = None
    id_field: str | None = None


class RouteSpec(_Section):
    """Where one topic's events go: a table, a rowkey design, columns, and the event-time field."""

    name: str
    topic: str
    table: str
    rowkey: str
    columns: dict[str, ColumnSpec] = Field(default_factory=dict)
    timestamp_field: str | None = Field(
        default=None, description="epoch-ms field used as the cell timestamp (replays rewrite the same cells)")
    counter: CounterSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_columns(cls, data: Any) -> Any:
        # `"d:h" = "hostname"` is shorthand for `"d:h" = { field = "hostname" }`
        if isinstance(data, dict) and isinstance(data.get("columns"), dict):
            data = dict(data)
            data["columns"] = {k: ({"field": v} if isinstance(v, str) else v) for k, v in data["columns"].items()}
        return data

    @model_validator(mode="after")
    def _check(self) -> RouteSpec:
        for column in self.columns:
            if column.count(":") != 1 or column.startswith(":"):
                raise ValueError(f"column {column!r} must be 'family:qualifier'")
        if self.counter is None and not self.columns:
            raise ValueError("a route needs columns, or a counter")
        if self.counter is not None and self.counter.column.count(":") != 1:
            raise ValueError(f"counter column {self.counter.column!r} must be 'family:qualifier'")
        return self


class Settings(BaseSettings):
    """The whole configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="HBASE_INGEST_", env_nested_delimiter="__", extra="forbid", frozen=True)

    kafka: KafkaSettings = KafkaSettings()
    hbase: HBaseSettings = HBaseSettings()
    writer: WriterSettings = WriterSettings()
    runtime: RuntimeSettings = RuntimeSettings()
    metrics: MetricsSettings = MetricsSettings()
    stack: StackSettings = StackSettings()
    tables: list[TableSpec] = Field(default_factory=list)
    routes: list[RouteSpec] = Field(default_factory=list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment variables win over the TOML file (passed as init values)
        return (env_settings, init_settings)

    @model_validator(mode="after")
    def _cross_check(self) -> Settings:
        names = [r.name for r in self.routes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"route names must be unique; repeated: {', '.join(dupes)}")
        tables = {t.name: t for t in self.tables}
        for route in self.routes:
            spec = tables.get(route.table)
            if spec is None:
                continue  # the table may exist already; the worker checks it against HBase at start
            families = [c.split(":", 1)[0] for c in route.columns]
            if route.counter is not None:
                families.append(route.counter.column.split(":", 1)[0])
            for family in families:
                if family not in spec.families:
                    raise ValueError(
                        f"route {route.name!r} writes family {family!r}, which table {route.table!r} "
                        f"does not declare (declared: {', '.join(sorted(spec.families))})")
        return self

    def route(self, name: str) -> RouteSpec:
        for route in self.routes:
            if route.name == name:
                return route
        raise ConfigError(f"no route named {name!r}; routes: {', '.join(r.name for r in self.routes) or 'none'}")

    def table(self, name: str) -> TableSpec:
        for table in self.tables:
            if table.name == name:
                return table
        return TableSpec(name=name)


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return f"{loc}: unknown key (check the spelling; see the documented settings)"
    given = err.get("input")
    shown = given if not isinstance(given, dict | list) else type(given).__name__
    msg = str(err.get("msg", "invalid"))
    if kind == "missing":
        return f"{loc}: required key is missing"
    return f"{loc}: {msg} (got {shown!r})"


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if key in ("tables", "routes"):
            out[key] = [*out.get(key, []), *value]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a profile and its ``include = [...]`` files (relative to it). Included tables and routes
    come first; any other key of the including file overrides the included ones."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"config file {path.name} includes itself (via {' -> '.join(p.name for p in seen)})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    includes = data.pop("include", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"{path.name}: include must be a list of file names, got {includes!r}")
    merged: dict[str, Any] = {}
    for inc in includes:
        merged = _merge(merged, _read_toml(path.parent / inc, (*seen, path)))
    return _merge(merged, data)


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load ``path`` (a TOML profile; None = embedded defaults), apply environment overrides.

    Raises :class:`ConfigError` naming every bad key, what was expected and what was given.
    """
    data: dict[str, Any] = {} if path is None else _read_toml(Path(path))
    data.update(overrides)
    try:
        return Settings(**data)
    except ValidationError as exc:
        where = f" in {path}" if path is not None else ""
        lines = "\n  ".join(_describe(dict(e)) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where}:\n  {lines}") from exc
