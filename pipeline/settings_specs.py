"""The tables and routes of a profile (``[[tables]]``, ``[[routes]]``): families, columns, counters and
rowkey designs. See :mod:`pipeline.settings` for how a profile is loaded and checked."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from pipeline.names import (
    family_name_problem,
)
from pipeline.settings_base import (
    INT32_MAX,
    RouteName,
    Section,
    TableName,
    TopicName,
)

__all__ = ["ColumnSpec", "CounterSpec", "FamilySpec", "RouteSpec", "TableSpec"]


class FamilySpec(Section):
    versions: int = Field(default=1, ge=1, le=INT32_MAX)
    ttl_s: int | None = Field(default=None, ge=1, le=INT32_MAX)
    compression: Literal["NONE", "GZ", "SNAPPY", "LZ4", "ZSTD"] | None = None
    in_memory: bool = False


class TableSpec(Section):
    name: TableName
    families: dict[str, FamilySpec] = Field(default_factory=lambda: {"d": FamilySpec()})
    regions: int | None = Field(default=None, ge=1, le=4096,
                                description="pre-split into this many regions (default: from the rowkey design)")

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


class ColumnSpec(Section):
    """One cell of a route: value taken from ``field`` (a dotted path) and encoded as
    ``text`` (UTF-8; numbers in decimal), ``json`` (orjson of the value) or ``long`` (8-byte big-endian)."""

    field: str
    encoding: Literal["text", "json", "long"] = "text"
    required: bool = True


class CounterSpec(Section):
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


class RouteSpec(Section):
    """Where one topic's events go: a table, a rowkey design, columns, and the event-time field."""

    name: RouteName
    topic: TopicName
    table: TableName
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
        for column in [*self.columns, *([self.counter.column] if self.counter is not None else [])]:
            problem = family_name_problem(column.split(":", 1)[0])
            if problem is not None:
                raise ValueError(f"column {column!r}: {problem}")
        return self


