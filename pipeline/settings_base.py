"""What every settings section shares: the numeric bounds, the name rules and the strict base model
(unknown keys refused, frozen, finite floats). See :mod:`pipeline.settings`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
)

from pipeline.names import (
    route_name_problem,
    table_name_problem,
    topic_name_problem,
)

__all__ = [
    "INT32_MAX",
    "MAX_CPU",
    "MAX_MS",
    "MAX_PORT",
    "MAX_S",
    "RouteName",
    "Section",
    "TableName",
    "TopicName",
    "name_rule",
]

# bounds: every number stays far inside what the C and wire types it reaches can hold
INT32_MAX = 2**31 - 1
MAX_MS = 86_400_000  # a day, for every *_ms duration
MAX_S = 86_400.0  # a day, for every *_s duration
MAX_PORT = 65535
MAX_CPU = 65535


def name_rule(problem_of: Callable[[str], str | None]) -> AfterValidator:
    """A validator refusing a name for which ``problem_of`` (:mod:`pipeline.names`) says what is wrong."""
    def check(value: str) -> str:
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(problem)
        return value
    return AfterValidator(check)


TopicName = Annotated[str, name_rule(topic_name_problem)]
TableName = Annotated[str, name_rule(table_name_problem)]
RouteName = Annotated[str, name_rule(route_name_problem)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


