"""The Kerberos identity of a GSSAPI Kafka client (``sasl_mechanism = "GSSAPI"``).

aiokafka (0.14) makes its GSSAPI security context with no credentials of its own
(``gssapi.SecurityContext(name=..., usage="initiate")``), in the event loop's default thread pool: the
process's *default* initiator credentials are used. :func:`kerberos_login` makes those the right ones:

- with ``sasl_kerberos_keytab`` (and ``sasl_kerberos_principal``): a ticket for the principal is got from the
  keytab now, into a private memory credential cache ``MEMORY:hbase-ingest-kafka-<pid>`` (through gssapi's
  credential store, as the HBase transport does), and the process's ``KRB5CCNAME`` names that cache and
  ``KRB5_CLIENT_KTNAME`` the keytab. MIT Kerberos then gets a new ticket from the keytab by itself when the
  one in the cache nears its end, at whatever login needs it (every reconnect of a long-lived client), and
  each client built again (:func:`~connectors.kafka.admin.common_options`) re-acquires it too. The ticket
  never touches the disk. One keytab identity per process: a second, different one is refused.
  The variables are process-wide: an HBase side that uses the ticket cache (``[hbase] kerberos_keytab``
  unset) would see this cache too, so give it its own keytab;
- without: the default ticket cache (``KRB5CCNAME``, filled by ``kinit``); it must hold a valid ticket now.

Whichever way, a failure to get credentials raises :class:`~pipeline.errors.KafkaAuthError` naming the
principal, the keytab or cache and GSSAPI's reason, before any connection is tried. Later, a login that
fails mid-run reaches the worker as aiokafka's generic errors (its coordinator cannot even copy gssapi's
error); :func:`login_problem` names the cause it can see, a keytab gone or a GSSAPI error in the chain,
so that :func:`~connectors.kafka.errors.map_errors` raises a clear error instead. The realm's
configuration is found through ``KRB5_CONFIG`` (else ``/etc/krb5.conf``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from connectors.kerberos import acquire, gss_reason, is_gss_error, keytab_problem, load_gssapi
from pipeline.errors import ConfigError, KafkaAuthError
from pipeline.settings import KafkaSettings

__all__ = ["kerberos_login", "login_problem"]

_lock = threading.Lock()
#: the (principal, keytab) this process's default credentials were made from
_installed: tuple[str, str] | None = None


def _gssapi() -> Any:
    try:
        return load_gssapi()
    except ImportError:
        raise ConfigError('[kafka] sasl_mechanism = "GSSAPI" needs the Python package gssapi (and MIT Kerberos\'s '
                          "libgssapi-krb5): pip install 'hbase-ingest[kerberos]'") from None


def kerberos_login(s: KafkaSettings) -> None:
    """Make the process's default Kerberos credentials those ``s`` names (see the module docstring); a no-op
    unless ``sasl_mechanism`` is GSSAPI. Raises :class:`KafkaAuthError` when no ticket can be had,
    :class:`ConfigError` when gssapi is missing, the keytab does not exist or another identity is in use."""
    global _installed
    if s.sasl_mechanism != "GSSAPI":
        return
    _gssapi()
    keytab, principal = s.sasl_kerberos_keytab, s.sasl_kerberos_principal
    if keytab is None or principal is None:
        try:
            acquire(None, None)
        except Exception as exc:
            if not is_gss_error(exc):
                raise
            raise KafkaAuthError(f"Kerberos credentials for Kafka (sasl_mechanism GSSAPI) from the ticket cache "
                                 f"{os.environ.get('KRB5CCNAME', '(the default one)')}: {gss_reason(exc)}; run kinit "
                                 "first, or set sasl_kerberos_principal and sasl_kerberos_keytab") from None
        return
    if not Path(keytab).is_file():
        raise ConfigError(f"[kafka] sasl_kerberos_keytab {str(keytab)!r} does not exist (or is not a file)")
    identity = (principal, str(Path(keytab).resolve()))
    ccache = f"MEMORY:hbase-ingest-kafka-{os.getpid()}"
    with _lock:
        if _installed is not None and _installed != identity:
            raise ConfigError(f"[kafka] sasl_kerberos_principal {principal!r}: this process already logs in to Kafka "
                              f"as {_installed[0]!r}; one Kerberos identity per process")
        try:
            acquire(principal, identity[1], ccache)
        except Exception as exc:
            if not is_gss_error(exc):
                raise
            reason = keytab_problem(principal, str(keytab)) or gss_reason(exc)
            raise KafkaAuthError(f"Kerberos credentials for {principal} (sasl_kerberos_principal) from keytab "
                                 f"{str(keytab)!r} (sasl_kerberos_keytab): {reason}") from None
        os.environ["KRB5CCNAME"] = ccache
        os.environ["KRB5_CLIENT_KTNAME"] = identity[1]
        _installed = identity


def login_problem(exc: BaseException) -> str | None:
    """Why Kafka's GSSAPI logins of this process fail, when ``exc`` (an error from aiokafka) may come from
    one: the keytab of the installed identity gone (MIT then has no way to a new ticket), else a GSSAPI
    error in its chain (its reason). None without either."""
    with _lock:
        installed = _installed
    reason: str | None = None
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes, bounded
        if seen is None:
            break
        if is_gss_error(seen):
            reason = gss_reason(seen)
            break
        seen = seen.__cause__ or seen.__context__
    if installed is not None and not Path(installed[1]).is_file():
        return (f"the Kerberos login of {installed[0]} cannot get a new ticket: its keytab {installed[1]!r} "
                "(sasl_kerberos_keytab) is gone" + (f" ({reason})" if reason else ""))
    if reason is not None:
        return f"the Kerberos login{f' of {installed[0]}' if installed else ''} failed: {reason}"
    return None
