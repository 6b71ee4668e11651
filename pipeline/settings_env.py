"""The ``HBASE_INGEST_*`` environment variables: the settings source that reads them over the TOML
profile, and the errors for the ones that are wrong.

Environment overrides use the prefix ``HBASE_INGEST_`` and ``__`` between nesting levels, e.g.
``HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or ``HBASE_INGEST_WRITER__MAX_BATCH_ROWS=500``.
Variable names are matched case-insensitively, and one setting may be given by one variable only.
A list setting takes a JSON array (``HBASE_INGEST_RUNTIME__CPU_AFFINITY='[0, 1]'``); a whole section
may be given as a JSON object (``HBASE_INGEST_HBASE='{"host": "h", "port": 9090}'``), its keys merged
over the file's (a variable naming one key wins over the section's object). Tables and routes come
from the TOML file only: ``HBASE_INGEST_TABLES`` and ``HBASE_INGEST_ROUTES`` are refused. Every other
``HBASE_INGEST_*`` variable must name a setting (a misspelt one is an error suggesting the intended
name), except the few the project reads itself (:data:`NON_SETTING_VARIABLES`). An open section (a
mapping the worker does not read: ``[stack]``, which ``devstack.settings`` types and checks) takes any
key, its value as given. Every wrong variable is named in one :class:`~pipeline.errors.ConfigError`;
a value that is not valid JSON is not echoed (it may hold a secret).

The sections and their keys are those of the settings model handed in (``settings_cls``, the
:class:`~pipeline.settings.Settings` class): this module does not import :mod:`pipeline.settings`,
which builds its settings source from this one.
"""

from __future__ import annotations

import difflib
import json
import os
import types
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Annotated, Any, TypeGuard, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

from pipeline.errors import ConfigError

__all__ = ["ENV_NESTED_DELIMITER", "ENV_PREFIX", "FILE_ONLY", "NON_SETTING_VARIABLES", "EnvironmentSource",
           "is_model", "read_environment", "unwrap_optional"]


ENV_PREFIX = "HBASE_INGEST_"
ENV_NESTED_DELIMITER = "__"

#: ``HBASE_INGEST_*`` variables that are not settings: the project reads them itself.
NON_SETTING_VARIABLES = frozenset({
    "HBASE_INGEST_CACHE",  # connectors.hbase.thrift2_idl, devstack.layout: the download cache folder
    "HBASE_INGEST_STATE",  # devstack.layout: the local stack's state folder
    "HBASE_INGEST_INFRA",  # devstack.layout: the infra folder (poms, config templates)
    "HBASE_INGEST_THRIFT2_IDL",  # connectors.hbase.thrift2_idl: the Thrift2 IDL file or jar (the Dockerfile sets it)
    "HBASE_INGEST_MAVEN_REPO",  # connectors.hbase.thrift2_idl: where a missing IDL's jar is downloaded from
    "HBASE_INGEST_PURE_PYTHON",  # pipeline.compiled: 1 = no compiled part is used
    "HBASE_INGEST_REQUIRE_COMPILED",  # hatch_build.py: 1 = a compiled part that fails to build fails the build
})

#: top-level settings that only the TOML file gives
FILE_ONLY = ("topics", "tables", "routes")


@dataclass
class _Environment:
    """The settings given by ``HBASE_INGEST_*`` variables: ``values`` nested as the settings are,
    ``origins`` maps a setting's location (``("kafka", "group_id")``) to the variable that gave it."""

    values: dict[str, Any] = dataclass_field(default_factory=dict)
    origins: dict[tuple[str, ...], str] = dataclass_field(default_factory=dict)


def unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _json_kind(info: FieldInfo) -> str | None:
    """What JSON a variable for this setting holds ("array", "object"), or None for a plain string."""
    annotation = unwrap_optional(info.annotation)
    if get_origin(annotation) in (list, tuple, set, frozenset):
        return "array"
    if get_origin(annotation) is dict or is_model(annotation):
        return "object"
    return None


def _sections(settings_cls: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """The sections of ``settings_cls`` an environment variable may set, by name: a section's model, or
    None for an open section (a mapping, such as the worker's ``[stack]``: any key, its value as given)."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in settings_cls.model_fields.items():
        if name in FILE_ONLY:
            continue
        if is_model(info.annotation):
            out[name] = info.annotation
        elif get_origin(info.annotation) is dict:
            out[name] = None
    return out


def _variable_names(settings_cls: type[BaseModel]) -> list[str]:
    names = sorted(NON_SETTING_VARIABLES)
    for section, model in _sections(settings_cls).items():
        names.append(f"{ENV_PREFIX}{section.upper()}")
        keys = model.model_fields if model is not None else ()
        names += [f"{ENV_PREFIX}{section.upper()}{ENV_NESTED_DELIMITER}{key.upper()}" for key in keys]
    return names


def _unknown_variable(var: str, settings_cls: type[BaseModel]) -> str:
    rest = var.upper()[len(ENV_PREFIX):]
    candidates = {name[len(ENV_PREFIX):]: name for name in _variable_names(settings_cls)}
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
    sections = ", ".join(s.upper() for s in _sections(settings_cls))
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
    annotation = unwrap_optional(info.annotation) if info is not None else None
    item = get_args(annotation)[0] if get_args(annotation) else str
    if get_origin(item) is Annotated:
        item = get_args(item)[0]
    return "'[0, 1]'" if item is int else "'[\"a\", \"b\"]'"


def read_environment(environ: Mapping[str, str], settings_cls: type[BaseModel]) -> _Environment:
    """Read the ``HBASE_INGEST_*`` variables (names are matched case-insensitively) against the sections
    of ``settings_cls``. Raises one :class:`ConfigError` naming every variable that names no setting or
    holds unparseable JSON."""
    env = _Environment()
    problems: list[str] = []
    sections = _sections(settings_cls)
    seen: dict[tuple[str, ...], str] = {}
    nested: list[tuple[str, str, str, Any]] = []
    for var in sorted(environ):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NON_SETTING_VARIABLES:
            continue
        raw = environ[var]
        path = tuple(upper[len(ENV_PREFIX):].lower().split(ENV_NESTED_DELIMITER))
        if path[0] in FILE_ONLY:
            problems.append(f"{var}: {path[0]} come from the TOML config file only ([[{path[0]}]] blocks), "
                            f"not from the environment; unset {var}")
            continue
        if path[0] not in sections:
            problems.append(_unknown_variable(var, settings_cls))
            continue
        model = sections[path[0]]
        info = model.model_fields.get(path[1]) if model is not None and len(path) == 2 else None
        if (model is not None and len(path) == 2 and info is None) or len(path) > 2:
            problems.append(_unknown_variable(var, settings_cls))
            continue
        if path in seen:
            problems.append(f"{var}: the same setting as {seen[path]}; set only one of them")
            continue
        seen[path] = var
        if len(path) == 1:  # a whole section, as a JSON object
            value, problem = _parse_json(var, raw, "object", _example(model, None) if model else "'{\"key\": ...}'")
            if problem is not None:
                problems.append(problem)
                continue
            env.values.setdefault(path[0], {}).update(value)
            env.origins.update({(path[0], str(key)): var for key in value})
            env.origins[path] = var
            continue
        if info is None:  # a key of an open section: its value as given, for whoever reads the section
            nested.append((var, path[0], path[1], raw))
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


class EnvironmentSource(PydanticBaseSettingsSource):
    """The ``HBASE_INGEST_*`` variables (see :func:`read_environment`), read when the settings are built."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole environment at once

    def __call__(self) -> dict[str, Any]:
        return read_environment(os.environ, self.settings_cls).values
