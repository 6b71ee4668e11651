"""One typed, validated, frozen configuration: a TOML profile (``config/*.toml``) overridden by
environment variables.

Environment overrides use the prefix ``HBASE_INGEST_`` and ``__`` between nesting levels, e.g.
``HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or ``HBASE_INGEST_WRITER__MAX_BATCH_ROWS=500``.
A list setting takes a JSON array (``HBASE_INGEST_RUNTIME__CPU_AFFINITY='[0, 1]'``); a whole section
may be given as a JSON object (``HBASE_INGEST_HBASE='{"host": "h", "port": 9090}'``), its keys merged
over the file's. Tables and routes come from the TOML file only: ``HBASE_INGEST_TABLES`` and
``HBASE_INGEST_ROUTES`` are refused. Every other ``HBASE_INGEST_*`` variable must name a setting (a
misspelt one is an error suggesting the intended name), except the few the project reads itself
(:data:`NON_SETTING_VARIABLES`).

Every section forbids unknown keys: a misspelt key is an error that names it and lists the valid ones.
Numbers are bounded (no value reaches a C call it would overflow), floats are finite, and topic,
table and route names follow :mod:`pipeline.names`. :func:`load_settings` turns every problem (an
unreadable file, a bad environment variable, pydantic's validation errors) into one
:class:`~pipeline.errors.ConfigError` whose message names each bad key or variable, what was expected
and what was given.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pipeline.errors import ConfigError
from pipeline.names import (
    family_name_problem,
    route_name_problem,
    table_name_problem,
    table_prefix_problem,
    topic_name_problem,
)

__all__ = [
    "ENV_NESTED_DELIMITER",
    "ENV_PREFIX",
    "NON_SETTING_VARIABLES",
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


ENV_PREFIX = "HBASE_INGEST_"
ENV_NESTED_DELIMITER = "__"

#: ``HBASE_INGEST_*`` variables that are not settings: the project reads them itself.
NON_SETTING_VARIABLES = frozenset({
    "HBASE_INGEST_CACHE",  # connectors.stack.layout: the download cache folder
    "HBASE_INGEST_STATE",  # connectors.stack.layout: the local stack's state folder
    "HBASE_INGEST_INFRA",  # connectors.stack.layout: the infra folder (poms, config templates)
    "HBASE_INGEST_THRIFT2_IDL",  # connectors.hbase.thrift2: the Thrift2 IDL file (set by the Dockerfile)
})

#: top-level settings that only the TOML file gives
_FILE_ONLY = ("tables", "routes")

# bounds: every number stays far inside what the C and wire types it reaches can hold
_INT32_MAX = 2**31 - 1
_MAX_MS = 86_400_000  # a day, for every *_ms duration
_MAX_S = 86_400.0  # a day, for every *_s duration
_MAX_PORT = 65535
_MAX_CPU = 65535


def _checked(value: str, problem_of: Callable[[str], str | None]) -> str:
    problem = problem_of(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
    max_poll_records: int = Field(default=2000, ge=1, le=1_000_000)
    fetch_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=_INT32_MAX,
                                 description="an int32 in Kafka's protocol")
    session_timeout_ms: int = Field(default=30_000, ge=1000, le=_MAX_MS)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100, le=_MAX_MS)
    request_timeout_ms: int = Field(default=30_000, ge=1000, le=_MAX_MS)

    @field_validator("dead_letter_topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        return _checked(value, topic_name_problem)


class HBaseSettings(_Section):
    """The HBase Thrift gateways: Thrift1 (happybase, data) and Thrift2 (DDL with split keys)."""

    host: str = "127.0.0.1"
    port: int = Field(default=9090, ge=1, le=_MAX_PORT)
    thrift2_port: int = Field(default=9091, ge=1, le=_MAX_PORT)
    pool_size: int = Field(default=8, ge=1, le=256)
    timeout_ms: int = Field(default=30_000, ge=100, le=_MAX_MS, description="per-call timeout")
    ddl_timeout_ms: int = Field(default=120_000, ge=1000, le=_MAX_MS)
    transport: Literal["buffered", "framed"] = "buffered"
    protocol: Literal["binary", "compact"] = "binary"
    table_prefix: str = Field(
        default="", description="prepended to every table name (a namespace when it ends in ':', e.g. 'dev:')")

    @field_validator("table_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        return _checked(value, table_prefix_problem)


class WriterSettings(_Section):
    """Per-region batching, concurrency, retries and the memory bound of the ingest worker."""

    max_batch_rows: int = Field(default=1000, ge=1, le=1_000_000)
    max_batch_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=2**30)
    max_batch_age_ms: int = Field(default=200, ge=1, le=_MAX_MS)
    concurrency: int = Field(default=8, ge=1, le=1024, description="batches written at once")
    max_in_flight_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024, le=2**40,
        description="memory of mutations read but not yet acknowledged (Python object cost included); "
                    "fetching pauses at this bound and resumes below half of it")
    retry_initial_ms: int = Field(default=100, ge=1, le=_MAX_MS)
    retry_max_ms: int = Field(default=10_000, ge=1, le=_MAX_MS)
    retry_deadline_s: float | None = Field(default=None, ge=0, description="None = retry forever")
    commit_interval_ms: int = Field(default=1000, ge=10, le=_MAX_MS)
    shutdown_timeout_s: float = Field(default=30.0, gt=0, le=_MAX_S)
    max_key_bytes: int = Field(default=32767, ge=1, le=32767)
    max_cell_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=_INT32_MAX)


class RuntimeSettings(_Section):
    """Process-wide tuning applied by the long-running commands (run, backfill, scan, demo)."""

    gc_threshold0: int = Field(
        default=50_000, ge=0, le=10_000_000,
        description="CPython generation-0 GC threshold, with the start-up heap frozen (0 = Python's defaults); "
                    "see pipeline.runtime.gctune")
    cpu_affinity: list[Annotated[int, Field(ge=0, le=_MAX_CPU)]] = Field(
        default_factory=list,
        description="CPUs the process may run on (empty = any); one CPU suits a process bound by its own "
                    "CPU, such as a big scan: see pipeline.runtime.affinity")


class MetricsSettings(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=_MAX_PORT, description="0 = any free port")
    skew_window_s: float = Field(default=60.0, gt=0, le=_MAX_S)


class StackSettings(_Section):
    """The local stack started by ``hbase-ingest stack up``. Paths default to user cache/state dirs."""

    cache_dir: Path | None = None
    state_dir: Path | None = None
    kafka_port: int = Field(default=9092, ge=1, le=_MAX_PORT)
    kafka_controller_port: int = Field(default=9093, ge=1, le=_MAX_PORT)
    zookeeper_port: int = Field(default=2181, ge=1, le=_MAX_PORT)
    master_port: int = Field(default=16000, ge=1, le=_MAX_PORT)
    regionserver_port: int = Field(default=16020, ge=1, le=_MAX_PORT)
    thrift_port: int = Field(default=9090, ge=1, le=_MAX_PORT)
    thrift2_port: int = Field(default=9091, ge=1, le=_MAX_PORT)
    kafka_heap_mb: int = Field(default=512, ge=128, le=1024 * 1024)
    hbase_heap_mb: int = Field(default=1024, ge=256, le=1024 * 1024)
    start_timeout_s: float = Field(default=180.0, gt=0, le=_MAX_S)


class FamilySpec(_Section):
    versions: int = Field(default=1, ge=1, le=_INT32_MAX)
    ttl_s: int | None = Field(default=None, ge=1, le=_INT32_MAX)
    compression: Literal["NONE", "GZ", "SNAPPY", "LZ4", "ZSTD"] | None = None
    in_memory: bool = False


class TableSpec(_Section):
    name: str
    families: dict[str, FamilySpec] = Field(default_factory=lambda: {"d": FamilySpec()})
    regions: int | None = Field(default=None, ge=1, le=4096,
                                description="pre-split into this many regions (default: from the rowkey design)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _checked(value, table_name_problem)

    @field_validator("families")
    @classmethod
    def _families(cls, value: dict[str, FamilySpec]) -> dict[str, FamilySpec]:
        if not value:
            raise ValueError("a table needs at least one column family")
        for family in value:
            problem = family_name_problem(family)
            if problem is not None:
                raise ValueError(f"family {family!r}: {problem}")
        return value


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
    amount: int = Field(default=1, ge=-(2**63), le=2**63 - 1, description="an HBase long")
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

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _checked(value, route_name_problem)

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        return _checked(value, topic_name_problem)

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        return _checked(value, table_name_problem)

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
        for column in [*self.columns, *([self.counter.column] if self.counter is not None else [])]:
            problem = family_name_problem(column.split(":", 1)[0])
            if problem is not None:
                raise ValueError(f"column {column!r}: {problem}")
        return self


class Settings(BaseSettings):
    """The whole configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

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
        return (_EnvironmentSource(settings_cls), init_settings)

    @model_validator(mode="after")
    def _cross_check(self) -> Settings:
        problems: list[str] = []
        for what, names in (("route", [r.name for r in self.routes]), ("table", [t.name for t in self.tables])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                problems.append(f"{what} names must be unique; repeated: {', '.join(dupes)}")
        dead = self.kafka.dead_letter_topic
        loops = [r.name for r in self.routes if r.topic == dead]
        if loops:
            problems.append(f"kafka.dead_letter_topic {dead!r} is also the topic of route(s) {', '.join(loops)}: "
                            f"events that fail would be read again; choose another dead-letter topic")
        prefix = self.hbase.table_prefix
        if prefix:
            named = dict.fromkeys([*(t.name for t in self.tables), *(r.table for r in self.routes)])
            for table in named:
                problem = table_name_problem(prefix + table)
                if problem is not None:
                    problems.append(f"table {table!r} with hbase.table_prefix {prefix!r} is {prefix + table!r} "
                                    f"in HBase: {problem}")
        tables = {t.name: t for t in self.tables}
        for route in self.routes:
            spec = tables.get(route.table)
            if spec is None:
                continue  # the table may exist already; the worker checks it against HBase at start
            families = [c.split(":", 1)[0] for c in route.columns]
            if route.counter is not None:
                families.append(route.counter.column.split(":", 1)[0])
            for family in dict.fromkeys(families):
                if family not in spec.families:
                    problems.append(
                        f"route {route.name!r} writes family {family!r}, which table {route.table!r} "
                        f"does not declare (declared: {', '.join(sorted(spec.families))})")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def route(self, name: str) -> RouteSpec:
        for route in self.routes:
            if route.name == name:
                return route
        raise ConfigError(f"no route named {name!r}; routes: {', '.join(r.name for r in self.routes) or 'none'}")

    def table(self, name: str) -> TableSpec:
        """The declared table ``name``, else one with the default families (``ConfigError`` for a name
        HBase would refuse)."""
        for table in self.tables:
            if table.name == name:
                return table
        problem = table_name_problem(name)
        if problem is not None:
            raise ConfigError(f"table {name!r}: {problem}")
        return TableSpec(name=name)


# -- environment variables -----------------------------------------------------------------------


@dataclass
class _Environment:
    """The settings given by ``HBASE_INGEST_*`` variables: ``values`` nested as the settings are,
    ``origins`` maps a setting's location (``("kafka", "group_id")``) to the variable that gave it."""

    values: dict[str, Any] = dataclass_field(default_factory=dict)
    origins: dict[tuple[str, ...], str] = dataclass_field(default_factory=dict)


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _json_kind(info: FieldInfo) -> str | None:
    """What JSON a variable for this setting holds ("array", "object"), or None for a plain string."""
    annotation = _unwrap_optional(info.annotation)
    if get_origin(annotation) in (list, tuple, set, frozenset):
        return "array"
    if get_origin(annotation) is dict or _is_model(annotation):
        return "object"
    return None


def _sections() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for name, info in Settings.model_fields.items():
        if name not in _FILE_ONLY and _is_model(info.annotation):
            out[name] = info.annotation
    return out


def _variable_names() -> list[str]:
    names = sorted(NON_SETTING_VARIABLES)
    for section, model in _sections().items():
        names.append(f"{ENV_PREFIX}{section.upper()}")
        names += [f"{ENV_PREFIX}{section.upper()}{ENV_NESTED_DELIMITER}{key.upper()}" for key in model.model_fields]
    return names


def _unknown_variable(var: str) -> str:
    rest = var.upper()[len(ENV_PREFIX):]
    candidates = {name[len(ENV_PREFIX):]: name for name in _variable_names()}
    squashed = {key.replace("_", ""): name for key, name in candidates.items()}
    guess = squashed.get(rest.replace("_", ""))
    if guess is None:
        close = difflib.get_close_matches(rest, list(candidates), n=1, cutoff=0.75)
        guess = candidates[close[0]] if close else None
    if guess is not None:
        hint = f"; did you mean {guess}?"
        if ENV_NESTED_DELIMITER in guess and ENV_NESTED_DELIMITER not in var:
            hint += f" (a section and its key are joined by {ENV_NESTED_DELIMITER!r})"
        return f"{var}: not a setting{hint}"
    sections = ", ".join(s.upper() for s in _sections())
    return (f"{var}: not a setting (settings are {ENV_PREFIX}<SECTION>{ENV_NESTED_DELIMITER}<KEY>, "
            f"SECTION one of {sections})")


def _parse_json(var: str, raw: str, kind: str, example: str) -> tuple[Any, str | None]:
    try:
        value = json.loads(raw)
    except ValueError as exc:  # the value is not echoed: it may hold a secret
        return None, f"{var}: expected a JSON {kind} such as {example}; the value is not valid JSON ({exc})"
    if not isinstance(value, list if kind == "array" else dict):
        return None, f"{var}: expected a JSON {kind} such as {example}, got a JSON {type(value).__name__}"
    return value, None


def _example(model: type[BaseModel] | None, info: FieldInfo | None) -> str:
    if model is not None:
        key = next(iter(model.model_fields))
        return f"'{{\"{key}\": ...}}'"
    annotation = _unwrap_optional(info.annotation) if info is not None else None
    item = get_args(annotation)[0] if get_args(annotation) else str
    if get_origin(item) is Annotated:
        item = get_args(item)[0]
    return "'[0, 1]'" if item is int else "'[\"a\", \"b\"]'"


def _environment(environ: Mapping[str, str]) -> _Environment:
    """Read the ``HBASE_INGEST_*`` variables (names are matched case-insensitively). Raises one
    :class:`ConfigError` naming every variable that names no setting or holds unparseable JSON."""
    env = _Environment()
    problems: list[str] = []
    sections = _sections()
    seen: dict[tuple[str, ...], str] = {}
    nested: list[tuple[str, str, str, Any]] = []
    for var in sorted(environ):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NON_SETTING_VARIABLES:
            continue
        raw = environ[var]
        path = tuple(upper[len(ENV_PREFIX):].lower().split(ENV_NESTED_DELIMITER))
        if path[0] in _FILE_ONLY:
            problems.append(f"{var}: {path[0]} come from the TOML config file only ([[{path[0]}]] blocks), "
                            f"not from the environment; unset {var}")
            continue
        model = sections.get(path[0])
        info = model.model_fields.get(path[1]) if model is not None and len(path) == 2 else None
        if model is None or (len(path) == 2 and info is None) or len(path) > 2:
            problems.append(_unknown_variable(var))
            continue
        if path in seen:
            problems.append(f"{var}: the same setting as {seen[path]}; set only one of them")
            continue
        seen[path] = var
        if info is None:  # a whole section, as a JSON object
            value, problem = _parse_json(var, raw, "object", _example(model, None))
            if problem is not None:
                problems.append(problem)
                continue
            env.values.setdefault(path[0], {}).update(value)
            env.origins.update({(path[0], str(key)): var for key in value})
            env.origins[path] = var
            continue
        kind = _json_kind(info)
        if kind is None:
            nested.append((var, path[0], path[1], raw))
            continue
        value, problem = _parse_json(var, raw, kind, _example(None, info))
        if problem is not None:
            problems.append(problem)
        else:
            nested.append((var, path[0], path[1], value))
    if problems:
        raise ConfigError("invalid environment variables:\n  " + "\n  ".join(problems))
    for var, section, key, value in nested:  # keys win over a whole-section object
        env.values.setdefault(section, {})[key] = value
        env.origins[(section, key)] = var
    return env


class _EnvironmentSource(PydanticBaseSettingsSource):
    """The ``HBASE_INGEST_*`` variables (see :func:`_environment`), read when the settings are built."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole environment at once

    def __call__(self) -> dict[str, Any]:
        return _environment(os.environ).values


# -- files and error messages --------------------------------------------------------------------


def _annotation_at(loc: tuple[int | str, ...]) -> Any:
    """The type of the setting at ``loc`` (as pydantic reports it), or None when it cannot be followed."""
    annotation: Any = Settings
    for part in loc:
        annotation = _unwrap_optional(annotation)
        if _is_model(annotation):
            info = annotation.model_fields.get(str(part))
            if info is None:
                return None
            annotation = info.annotation
        elif get_origin(annotation) is list and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        else:
            return None
    return _unwrap_optional(annotation)


def _describe(err: Mapping[str, Any], origins: Mapping[tuple[str, ...], str], data: Mapping[str, Any]) -> str:
    """One line per problem: where (the key, the route or table, the variable that gave it), what is
    wrong, and what was given. A check of a whole object (a route, a table, the settings) or a whole
    list or table leaves out what was given: it would show as its type only, which adds nothing."""
    loc_parts = tuple(err.get("loc", ()))
    shown_parts = [str(p) for p in loc_parts]
    if len(loc_parts) >= 2 and loc_parts[0] in _FILE_ONLY and isinstance(loc_parts[1], int):
        items = data.get(str(loc_parts[0]))  # name the route or table: its index alone is hard to find
        item = items[loc_parts[1]] if isinstance(items, list) and 0 <= loc_parts[1] < len(items) else None
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            shown_parts[1] += f" ({str(loc_parts[0])[:-1]} {item['name']!r})"
    loc = ".".join(shown_parts) or "(top level)"
    var = origins.get(tuple(str(p) for p in loc_parts[:2]))
    if var is not None:
        loc += f" (from {var})"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        parent = _annotation_at(loc_parts[:-1])
        if not _is_model(parent):
            return f"{loc}: unknown key (check the spelling; see the documented settings)"
        valid = list(parent.model_fields)
        close = difflib.get_close_matches(str(loc_parts[-1]), valid, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{loc}: unknown key; {hint}(valid keys: {', '.join(valid)})"
    if kind == "missing":
        return f"{loc}: required key is missing"
    msg = str(err.get("msg", "invalid"))
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    given = err.get("input")
    if isinstance(given, dict | list) and (kind == "value_error" or _is_model(_annotation_at(loc_parts))):
        shown = ""
    else:
        text = repr(given if not isinstance(given, dict | list) else type(given).__name__)
        shown = f" (got {text if len(text) <= 80 else text[:76] + ' ...'})"
    return "\n  ".join(f"{loc}: {line}{shown}" for line in msg.split("\n"))


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if key in _FILE_ONLY:
            out[key] = [*out.get(key, []), *value]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a profile and its ``include = [...]`` files (relative to it). Included tables and routes
    come first; any other key of the including file overrides the included ones."""
    try:
        path = path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL in the name
        raise ConfigError(f"config file {path} cannot be opened: {exc}") from exc
    if path in seen:
        raise ConfigError(f"config file {path.name} includes itself (via {' -> '.join(p.name for p in seen)})")
    what = f"config file {path}" + (f" (included by {seen[-1].name})" if seen else "")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"{what} is a directory; expected a TOML file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                          f"{exc.start}); save it as UTF-8") from exc
    except OSError as exc:
        raise ConfigError(f"{what} cannot be read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} is not valid TOML: {exc}") from exc
    includes = data.pop("include", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"{path.name}: include must be a list of file names, got {includes!r}")
    for key in _FILE_ONLY:
        value = data.get(key, [])
        bad = [v for v in value if not isinstance(v, dict)] if isinstance(value, list) else [value]
        if bad:
            got = (f"an array holding a {type(bad[0]).__name__}" if isinstance(value, list)
                   else f"one [{key}] table" if isinstance(value, dict) else type(value).__name__)
            raise ConfigError(f"{path.name}: {key} must be an array of tables, each written as a [[{key}]] "
                              f"block (got {got})")
    merged: dict[str, Any] = {}
    for inc in includes:
        merged = _merge(merged, _read_toml(path.parent / inc, (*seen, path)))
    return _merge(merged, data)


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load ``path`` (a TOML profile; None = embedded defaults), apply environment overrides.

    Raises :class:`ConfigError` naming every bad key or variable, what was expected and what was given.
    """
    data: dict[str, Any] = {} if path is None else _read_toml(Path(path))
    data.update(overrides)
    origins = _environment(os.environ).origins
    try:
        return Settings(**data)
    except ValidationError as exc:
        where = f" in {path}" if path is not None else ""
        lines = "\n  ".join(_describe(e, origins, data) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where}:\n  {lines}") from exc
