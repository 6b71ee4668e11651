"""The rules for the names a configuration gives: Kafka topics, HBase tables, routes.

Each function returns ``None`` for a good name, else one sentence saying what is wrong with it (the
name itself is left out: the caller shows it next to the key it came from).

- Kafka topic (Kafka's ``Topic.validate``): 1 to 249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.
- HBase table (HBase's ``TableName``): an optional ``namespace:`` of ``[a-zA-Z0-9_]``, then a qualifier
  of ``[a-zA-Z0-9_.-]`` that does not start with ``.`` or ``-``; neither part may be empty or
  ``zookeeper``. HBase also accepts non-ASCII letters; this project keeps table names ASCII. The
  ``hbase`` namespace holds HBase's own tables and is refused.
- HBase column family (HBase's ``ColumnFamilyDescriptorBuilder``): not empty, not starting with ``.``,
  no ``:``, ``\\``, ``/`` or control characters, not ``recovered.edits``.
- Route: not empty, no control characters, no space at either end (it is typed as ``--route NAME``).
"""

from __future__ import annotations

import re

__all__ = [
    "KAFKA_TOPIC_MAX_CHARS",
    "family_name_problem",
    "route_name_problem",
    "table_name_problem",
    "table_prefix_problem",
    "topic_name_problem",
]

#: Kafka's limit on a topic name's length
KAFKA_TOPIC_MAX_CHARS = 249

_TOPIC_CHAR = re.compile(r"[A-Za-z0-9._-]")
_NAMESPACE_CHAR = re.compile(r"[A-Za-z0-9_]")
_QUALIFIER_CHAR = re.compile(r"[A-Za-z0-9_.-]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: a znode name ZooKeeper refuses, so HBase refuses it as a namespace or table qualifier
_ZOOKEEPER = "zookeeper"
#: HBase's system namespace (hbase:meta, ...)
_SYSTEM_NAMESPACE = "hbase"


def _bad_chars(name: str, allowed: re.Pattern[str]) -> str:
    return "".join(dict.fromkeys(c for c in name if not allowed.fullmatch(c)))


def topic_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a Kafka topic name, or None."""
    if not name:
        return "a Kafka topic name must not be empty"
    if name in (".", ".."):
        return "a Kafka topic cannot be named '.' or '..'"
    if len(name) > KAFKA_TOPIC_MAX_CHARS:
        return f"a Kafka topic name has at most {KAFKA_TOPIC_MAX_CHARS} characters, this one {len(name)}"
    bad = _bad_chars(name, _TOPIC_CHAR)
    if bad:
        return f"a Kafka topic name may only contain ASCII letters, digits, '.', '_' and '-' (not {bad!r})"
    return None


def table_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` (``[namespace:]qualifier``) as an HBase table name, or None."""
    if not name:
        return "an HBase table name must not be empty"
    if name.count(":") > 1:
        return "an HBase table name has at most one ':' (between the namespace and the table)"
    namespace, colon, qualifier = name.rpartition(":")
    if colon:
        if not namespace:
            return "the HBase namespace before ':' must not be empty"
        bad = _bad_chars(namespace, _NAMESPACE_CHAR)
        if bad:
            return f"an HBase namespace may only contain ASCII letters, digits and '_' (not {bad!r})"
        if namespace == _ZOOKEEPER:
            return f"HBase refuses the namespace {_ZOOKEEPER!r}"
        if namespace == _SYSTEM_NAMESPACE:
            return f"the {_SYSTEM_NAMESPACE!r} namespace holds HBase's own tables; use another namespace"
    if not qualifier:
        return "the HBase table name after the namespace's ':' must not be empty"
    if qualifier[0] in ".-":
        return "an HBase table name must not start with '.' or '-'"
    bad = _bad_chars(qualifier, _QUALIFIER_CHAR)
    if bad:
        return f"an HBase table name may only contain ASCII letters, digits, '_', '.' and '-' (not {bad!r})"
    if qualifier == _ZOOKEEPER:
        return f"HBase refuses the table name {_ZOOKEEPER!r}"
    return None


def table_prefix_problem(prefix: str) -> str | None:
    """What is wrong with ``prefix`` as the start of every HBase table name (``prefix + name``), or None.
    An empty prefix is fine; ``"ns:"`` puts the tables in namespace ``ns``."""
    if not prefix:
        return None
    problem = table_name_problem(prefix + "t")
    return None if problem is None else f"it cannot start an HBase table name: {problem}"


def route_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a route name, or None."""
    if not name.strip():
        return "a route name must not be empty"
    if name != name.strip():
        return "a route name must not start or end with a space"
    if _CONTROL.search(name):
        return "a route name must not contain control characters"
    return None


def family_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as an HBase column family name, or None (HBase's rules: not empty,
    not starting with '.', no ':', '\\', '/' or control characters, not ``recovered.edits``)."""
    if not name:
        return "a column family name must not be empty"
    if name.startswith("."):
        return "a column family name must not start with '.'"
    bad = "".join(dict.fromkeys(c for c in name if c in ":\\/" or _CONTROL.fullmatch(c)))
    if bad:
        return f"a column family name must not contain ':', '\\', '/' or control characters (has {bad!r})"
    if name == "recovered.edits":
        return "HBase refuses the column family name 'recovered.edits'"
    return None
