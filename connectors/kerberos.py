"""Kerberos client credentials, shared by the HBase gateways' transports (:mod:`connectors.hbase.transport`)
and the Kafka GSSAPI login (:mod:`connectors.kafka.kerberos`): getting initiator credentials from a keytab
or the ticket cache, GSSAPI's reasons in one line, and what a keytab holds (to say why a keytab does not
serve a principal).

Errors are left to the callers, each with its own error type and words: :func:`acquire` raises gssapi's
own errors (:func:`is_gss_error`), and :func:`keytab_problem` turns the commonest mistake (a keytab of
another principal, which MIT reports as "No credentials cache found") into a sentence naming both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["KDC_UNREACHABLE", "acquire", "gss_reason", "is_gss_error", "keytab_principals", "keytab_problem",
           "load_gssapi"]

#: MIT's words for a KDC that does not answer: a transient failure, not a wrong setting
KDC_UNREACHABLE = ("Cannot contact any KDC", "Cannot find KDC")


def load_gssapi() -> Any:
    """The ``gssapi`` module; ImportError when it is missing (an optional dependency: the ``kerberos``
    extra, which builds against MIT Kerberos's ``libkrb5-dev``)."""
    import gssapi

    return gssapi


def is_gss_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of gssapi's errors (without importing gssapi when it is not loaded)."""
    return any(c.__module__.startswith("gssapi") for c in type(exc).__mro__)


def gss_reason(exc: BaseException) -> str:
    """GSSAPI's own words for ``exc`` (its major and minor messages), on one line."""
    gen, minor = getattr(exc, "gen_message", None), getattr(exc, "min_message", None)
    text = f"{gen()}: {minor}" if callable(gen) and minor else str(exc)
    return " ".join(str(text).split())


def acquire(principal: str | None, keytab: str | None, ccache: str | None = None) -> Any:
    """Initiator credentials of ``principal`` (None: the cache's default principal): from ``keytab`` into
    ``ccache`` (a ``MEMORY:`` cache keeps the ticket off the disk; MIT takes a new one from the keytab as it
    expires), else from the default ticket cache as it is. The ticket is looked at now, so a failure raises
    here (gssapi's error), not at the first connection."""
    gssapi = load_gssapi()
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
    if keytab:
        store = {"client_keytab": keytab, **({"ccache": ccache} if ccache else {})}
        creds = gssapi.Credentials(name=name, usage="initiate", store=store)
    else:
        creds = gssapi.Credentials(name=name, usage="initiate")
    creds.lifetime  # noqa: B018 - forces the ticket to be had now: its error names the cause
    return creds


def keytab_principals(path: str) -> list[str] | None:
    """The principals (``name/instance@REALM``) whose keys the MIT keytab at ``path`` holds, in file order and
    without repeats; None when the file cannot be read as one.

    Layout (MIT's keytab format 0x0502, big-endian): ``u16`` version, then entries of ``i32`` size (negative:
    a hole of that many bytes) holding ``u16`` component count, the realm and each component as ``u16``
    length + bytes, then name type, timestamp, key version and key (not read here)."""
    try:
        data = Path(path).read_bytes()
        if data[:2] != b"\x05\x02":
            return None
        out: list[str] = []
        pos = 2
        while pos + 4 <= len(data):
            size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            pos += 4
            if size > 0:
                entry, at, parts = data[pos:pos + size], 2, []
                for _ in range(int.from_bytes(entry[:2], "big") + 1):  # the realm, then each component
                    n = int.from_bytes(entry[at:at + 2], "big")
                    parts.append(entry[at + 2:at + 2 + n].decode("utf-8", "replace"))
                    at += 2 + n
                name = "/".join(parts[1:]) + "@" + parts[0]
                if name not in out:
                    out.append(name)
            pos += abs(size)
    except (OSError, IndexError, ValueError):
        return None
    return out


def keytab_problem(principal: str | None, keytab: str | None) -> str | None:
    """``"the keytab K holds no key of P (it holds ...)"`` when ``keytab`` is a readable keytab without
    ``principal``'s keys, else None (the caller then quotes GSSAPI's own reason)."""
    if not principal or not keytab:
        return None
    held = keytab_principals(keytab)
    if held is None or principal in held:
        return None
    return f"the keytab {keytab} holds no key of {principal} (it holds {', '.join(held) or 'no key at all'})"
