"""HBase's ``AccessDeniedException`` (the AccessController refused a call) as the project's
:class:`~pipeline.errors.HBaseAuthError`, on every path: a Thrift1 ``IOError``, a Thrift2 ``TIOError`` (with or
without the class name in its text), a native ``Multi`` action's exception and a native call's exception. Pure.

HBase words its refusals two ways (2.6)::

    Insufficient permissions for user 'stranger' (table=orders, action=READ)
    Insufficient permissions (user=stranger@REALM, scope=default:orders, family=d:v, params=[...],action=WRITE)

(the first for a scan, a get or an admin call, the second for a put or a delete; ``global`` or
``namespace=ns`` in place of the table for a right on a wider scope). :func:`access_denied` reads the user,
the scope and the action out of either. The error it builds names them, with the grant that would allow the
call; it is not retryable (every gateway and server would refuse the same), and the worker stops on it with
nothing committed and nothing dead-lettered: a missing grant is configuration, not bad data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.errors import HBaseAuthError

__all__ = ["ACCESS_DENIED_CLASS", "Denial", "access_denied", "denied_error"]

ACCESS_DENIED_CLASS = "org.apache.hadoop.hbase.security.AccessDeniedException"
_MARKS = ("AccessDeniedException", "Insufficient permissions")
_USER = re.compile(r"user '([^']+)'|user=([^,\s)]+)")
_ACTION = re.compile(r"action=([A-Z]+)")
_TABLE = re.compile(r"(?:table|scope)=([^,\s)\]]+)")
_NAMESPACE = re.compile(r"namespace=([^,\s)\]]+)")
#: HBase's permission letters, as ``grant`` takes them
_LETTER = {"READ": "R", "WRITE": "W", "EXEC": "X", "CREATE": "C", "ADMIN": "A"}


@dataclass(frozen=True, slots=True)
class Denial:
    """What HBase refused: ``user`` (as the server names it, a short name or a principal; "" when the text names
    none, e.g. an ``AccessDeniedException`` that is no permission check), ``action`` (READ,
    WRITE, EXEC, CREATE, ADMIN; "" when the text names none), ``scope`` (``table 'name'``, ``namespace 'ns'``
    or ``global``) and ``table`` (the table's name without the ``default:`` namespace, or None)."""

    user: str
    action: str
    scope: str
    table: str | None
    server_text: str
    #: the namespace of a right on a namespace (``scope`` "namespace 'ns'"), else None
    namespace: str | None = None

    def grant_hint(self) -> str:
        """The hbase shell ``grant`` that would allow the call."""
        letter = _LETTER.get(self.action, "RW")
        user = self.user.partition("@")[0].partition("/")[0]
        on = f", '{self.table}'" if self.table else (f", '@{self.namespace}'" if self.namespace else "")
        return f"grant '{user}', '{letter}'{on}"


def access_denied(text: str, table: str | None = None) -> Denial | None:
    """The refusal in ``text`` (an exception's message or class and message), or None when ``text`` is not
    an ``AccessDeniedException``. ``table``: the table the call was about, when the server's text names none."""
    if not any(mark in text for mark in _MARKS):
        return None
    line = next((ln for ln in text.splitlines() if "Insufficient permissions" in ln),
                text.splitlines()[0] if text else "")
    start = line.find("Insufficient permissions")
    server_text = line[start:] if start >= 0 else line.strip()
    user_match = _USER.search(server_text)
    user = next((g for g in user_match.groups() if g), "") if user_match else ""
    action_match = _ACTION.search(server_text)
    action = action_match.group(1) if action_match else ""
    table_match = _TABLE.search(server_text)
    namespace_match = _NAMESPACE.search(server_text)
    if (table_match is not None and namespace_match is not None and table_match.group(0).startswith("scope=")
            and table_match.group(1) == namespace_match.group(1)):
        table_match = None  # "scope=ns, params=[namespace=ns,table=...]": a right on the namespace (CREATE)
    named = table_match.group(1).removeprefix("default:") if table_match else None
    if named is None and namespace_match is None and table:
        named = table
    if named is not None:
        scope = f"table {named!r}"
    elif namespace_match is not None:
        scope = f"namespace {namespace_match.group(1)!r}"
    else:
        scope = "global"
    return Denial(user, action, scope, named, server_text[:400],
                  namespace_match.group(1) if named is None and namespace_match is not None else None)


def denied_error(denial: Denial, where: str, table: str | None = None) -> HBaseAuthError:
    """The error for ``denial``, ``where`` naming the call (``"write batch on table 'orders'"``)."""
    if not denial.user or not denial.action:
        return HBaseAuthError(f"{where}: HBase refused the call (AccessDeniedException: {denial.server_text})",
                              table=table or denial.table, user=denial.user or None, action=denial.action or None)
    return HBaseAuthError(
        f"{where}: HBase refused user {denial.user!r}: the {denial.action} permission on {denial.scope} is missing "
        f"(AccessDeniedException: {denial.server_text}); an HBase administrator can grant it: {denial.grant_hint()}",
        table=table or denial.table, user=denial.user, action=denial.action)
