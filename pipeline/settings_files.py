"""Reading a TOML profile, and wording the configuration's validation errors: the two halves of
:func:`pipeline.settings.load_settings` around pydantic's validation.

A profile may ``include = [...]`` other files (relative to it): included tables and routes come first;
any other key of the including file overrides the included ones. A file that cannot be read (missing,
a directory, not UTF-8, not TOML, including itself, tables or routes not written as ``[[...]]``
blocks) is a :class:`~pipeline.errors.ConfigError` naming the file and what is wrong with it.

A validation error becomes one line per problem naming the bad key (with the route or table it is in,
and the ``HBASE_INGEST_*`` variable that gave it), what was expected and what was given; a misspelt
key is named with the valid ones.

Key paths are followed from the settings model handed in (``settings_cls``, the
:class:`~pipeline.settings.Settings` class): this module does not import :mod:`pipeline.settings`,
which uses it.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from pipeline.errors import ConfigError
from pipeline.settings_env import FILE_ONLY, is_model, unwrap_optional

__all__ = ["describe_error", "read_toml"]


def _annotation_at(loc: tuple[int | str, ...], settings_cls: type[BaseModel]) -> Any:
    """The type of the setting at ``loc`` (as pydantic reports it) in ``settings_cls``, or None when it
    cannot be followed."""
    annotation: Any = settings_cls
    for part in loc:
        annotation = unwrap_optional(annotation)
        if is_model(annotation):
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
    return unwrap_optional(annotation)


def describe_error(err: Mapping[str, Any], origins: Mapping[tuple[str, ...], str], data: Mapping[str, Any],
              settings_cls: type[BaseModel]) -> str:
    """One line per problem: where (the key, the route or table, the variable that gave it), what is
    wrong, and what was given. A check of a whole object (a route, a table, the settings) or a whole
    list or table leaves out what was given: it would show as its type only, which adds nothing."""
    loc_parts = tuple(err.get("loc", ()))
    shown_parts = [str(p) for p in loc_parts]
    if len(loc_parts) >= 2 and loc_parts[0] in FILE_ONLY and isinstance(loc_parts[1], int):
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
        parent = _annotation_at(loc_parts[:-1], settings_cls)
        if not is_model(parent):
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
    if isinstance(given, dict | list) and (kind == "value_error"
                                           or is_model(_annotation_at(loc_parts, settings_cls))):
        shown = ""
    else:
        text = repr(given if not isinstance(given, dict | list) else type(given).__name__)
        shown = f" (got {text if len(text) <= 80 else text[:76] + ' ...'})"
    return "\n  ".join(f"{loc}: {line}{shown}" for line in msg.split("\n"))


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if key in FILE_ONLY:
            out[key] = [*out.get(key, []), *value]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def read_toml(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
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
    for key in FILE_ONLY:
        value = data.get(key, [])
        bad = [v for v in value if not isinstance(v, dict)] if isinstance(value, list) else [value]
        if bad:
            got = (f"an array holding a {type(bad[0]).__name__}" if isinstance(value, list)
                   else f"one [{key}] table" if isinstance(value, dict) else type(value).__name__)
            raise ConfigError(f"{path.name}: {key} must be an array of tables, each written as a [[{key}]] "
                              f"block (got {got})")
    merged: dict[str, Any] = {}
    for inc in includes:
        merged = _merge(merged, read_toml(path.parent / inc, (*seen, path)))
    return _merge(merged, data)
