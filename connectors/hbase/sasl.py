"""SASL GSSAPI (Kerberos, RFC 4752) as both ways to HBase speak it: the Thrift gateways' SASL transport
(:mod:`connectors.hbase.transport`) and the native RPC (:mod:`connectors.hbase.native.login`). What the two
share lives here: the client's credentials, a GSSAPI context for ``<service>@<host>``, the security-layer
negotiation that settles the quality of protection (QOP), and wrapping once it is settled. How the tokens
travel (Thrift's SASL frames, HBase's status words) is each transport's own business.

QOP levels and their names: SASL's ``auth`` / ``auth-int`` / ``auth-conf`` are HBase's ``authentication`` /
``integrity`` / ``privacy`` (``hbase.rpc.protection``, ``hbase.thrift.security.qop``). With ``auth`` the
messages travel as they are; with ``auth-int`` each is GSSAPI-wrapped with a checksum (readable, not
alterable), with ``auth-conf`` also encrypted.

Security-layer negotiation (RFC 4752 section 3.3), once the Kerberos context is established: the server
sends a wrapped 4-byte offer, ``u8`` bitmask of the QOPs it accepts (:data:`QOP_BIT`) + ``u24`` BE the
largest wrapped message it takes; the client answers with a wrapped ``u8`` chosen QOP + ``u24`` BE its own
largest (:data:`MAX_BUFFER`), without an authorization id (it acts as its principal).

Credentials: ``principal`` + ``keytab`` acquire tickets from the keytab into a per-process memory cache,
so a long-lived worker needs no ``kinit`` and no renewal thread; without a keytab, the default ticket cache
(``KRB5CCNAME``) is used as it is (``kinit``, ``k5start`` or the like keep it fresh). Renewal: credentials
are held per process and login, and once :data:`RENEW_AT` of the ticket's lifetime has passed, the next
new context (a SASL connection, a native connection, every SPNEGO request) gets them afresh: a new ticket
from the keytab, or the cache read again. While the KDC answers, no context is made from a ticket with
less than a fifth of its lifetime left; an established connection outlives its ticket (servers check
tickets when a connection authenticates, never after). MIT's GSSAPI does not do this on its own:
credentials acquired from a keytab once fail with "Ticket expired" at the first context after their
lifetime.

The KDC and realm come from
``krb5.conf`` (``KRB5_CONFIG``). The server's principal names the host the client connects to: connect to
the name in the principal (``localhost``, a FQDN), not to an IP address.

Errors: credentials that cannot be had (no ticket, a keytab without the principal, an unknown principal or
service) and a QOP the server does not offer raise :class:`~pipeline.errors.HBaseAuthError`; a KDC that
cannot be reached is :class:`~pipeline.errors.HBaseUnavailable`. A renewal that fails says so, with the
ticket's time left: a keytab removed mid-run stops the worker at the next renewal with its path named,
while a KDC that does not answer leaves the held ticket in use until it expires.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from connectors.kerberos import KDC_UNREACHABLE, acquire, gss_reason, is_gss_error, keytab_problem, load_gssapi
from pipeline.errors import HBaseAuthError, HBaseUnavailable
from pipeline.settings import HBaseSettings

__all__ = ["MAX_BUFFER", "QOP_BIT", "RENEW_AT", "GssSession", "KerberosLogin", "Login", "Qop", "auth_failure",
           "choose_layer", "credentials", "gss_context"]

Qop = Literal["auth", "auth-int", "auth-conf"]
#: the SASL GSSAPI security-layer bits (RFC 4752 section 3.3)
QOP_BIT: dict[str, int] = {"auth": 1, "auth-int": 2, "auth-conf": 4}
#: the largest wrapped message the client takes, told to the server (u24: the most the layout holds)
MAX_BUFFER = 0xFFFFFF
#: the share of a ticket's lifetime after which new contexts get credentials afresh (Hadoop's login renews
#: at the same point)
RENEW_AT = 0.8
#: after a renewal that could not reach the KDC, the held ticket serves this long before the next attempt
RENEW_RETRY_S = 5.0


class Login(Protocol):
    """Who logs in, to which service, asking for which QOP (``ThriftSecurity`` and :class:`KerberosLogin`)."""

    @property
    def principal(self) -> str | None: ...
    @property
    def keytab(self) -> str | None: ...
    @property
    def service(self) -> str: ...
    @property
    def qop(self) -> Qop: ...


@dataclass(frozen=True, slots=True)
class KerberosLogin:
    """The native client's Kerberos login (picklable, hashable): ``principal`` (None: the ticket cache's),
    its ``keytab`` (None: the ticket cache), the servers' ``service`` (their principal is
    ``<service>/<server host>@REALM``) and the ``qop`` asked for."""

    principal: str | None = None
    keytab: str | None = None
    service: str = "hbase"
    qop: Qop = "auth-conf"

    @classmethod
    def of(cls, s: HBaseSettings) -> KerberosLogin | None:
        """The login the ``[hbase]`` keys describe; None unless ``auth = "kerberos"``."""
        if s.auth != "kerberos":
            return None
        return cls(s.kerberos_principal, None if s.kerberos_keytab is None else str(s.kerberos_keytab),
                   s.kerberos_service, s.sasl_qop)


# -- credentials and contexts ----------------------------------------------------------------------------

_creds_lock = threading.Lock()


@dataclass(slots=True)
class _Held:
    """Credentials held for one login: the gssapi object, where its tickets live (a ``MEMORY:`` cache for a
    keytab login, None for the default cache), and when (``time.monotonic``) they expire and are renewed."""

    creds: Any
    ccache: str | None
    expires_at: float
    renew_at: float


_creds: dict[tuple[str | None, str | None], _Held] = {}


def _gssapi() -> Any:
    try:
        return load_gssapi()
    except ImportError as exc:  # an optional dependency: the `kerberos` extra
        raise HBaseAuthError("Kerberos for HBase needs the Python package gssapi "
                             "(pip install 'hbase-ingest[kerberos]'; it builds against libkrb5-dev)") from exc


def auth_failure(what: str, exc: BaseException) -> Exception:
    """The project error for GSSAPI's ``exc`` while doing ``what``: HBaseUnavailable when the KDC cannot
    be reached (a transient failure), else HBaseAuthError, with GSSAPI's own words."""
    text = gss_reason(exc)
    if any(words in text for words in KDC_UNREACHABLE):
        return HBaseUnavailable(f"{what}: the Kerberos KDC cannot be reached ({text})")
    return HBaseAuthError(f"{what}: {text}")


def credentials(login: Login, clock: Callable[[], float] = time.monotonic) -> Any:
    """The initiator credentials of ``login``: held per process and login, got afresh once :data:`RENEW_AT`
    of their lifetime has passed (module docstring). May reach the KDC (a ticket from the keytab): call it
    from a worker thread in async code."""
    key = (login.principal, login.keytab)
    with _creds_lock:
        held = _creds.get(key)
        now = clock()
        if held is not None and now < held.renew_at:
            return held.creds
        _gssapi()
        who = login.principal or "the default principal"
        renewing = "" if held is None else (f" (renewing its ticket, which expires in "
                                            f"{max(0.0, held.expires_at - now):.0f} s)")
        if login.keytab and not Path(login.keytab).is_file():
            raise HBaseAuthError(f"kerberos_keytab {login.keytab}: no such file{renewing}")
        ccache = held.ccache if held is not None else (
            f"MEMORY:hbase-ingest-{os.getpid()}-{len(_creds)}" if login.keytab else None)
        try:
            creds = acquire(login.principal, login.keytab, ccache)
            left = creds.lifetime
        except Exception as exc:
            if not is_gss_error(exc):
                raise
            problem = keytab_problem(login.principal, login.keytab)
            if problem is not None:
                raise HBaseAuthError(f"Kerberos credentials for {who}{renewing}: {problem}") from exc
            src = f"keytab {login.keytab}" if login.keytab else "the ticket cache (KRB5CCNAME; kinit first)"
            failure = auth_failure(f"Kerberos credentials for {who} from {src}{renewing}", exc)
            if held is not None and now < held.expires_at and isinstance(failure, HBaseUnavailable):
                held.renew_at = min(held.expires_at, now + RENEW_RETRY_S)  # the KDC is away: keep the ticket
                return held.creds
            raise failure from exc
        lifetime = math.inf if left is None else float(left)
        _creds[key] = _Held(creds, ccache, now + lifetime, now + RENEW_AT * lifetime)
        return creds


#: SPNEGO's mechanism (RFC 4178): what an HTTP ``Negotiate`` header carries
_SPNEGO_OID = "1.3.6.1.5.5.2"


def gss_context(login: Login, service: str, host: str, *, spnego: bool = False) -> Any:
    """A new initiator context for ``service@host`` (Kerberos itself, or wrapped in SPNEGO), asking for
    mutual authentication, integrity and confidentiality (the security layer then settles what is used)."""
    gssapi = _gssapi()
    target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
    flags = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.integrity,
             gssapi.RequirementFlag.confidentiality]
    mech = gssapi.OID.from_int_seq(_SPNEGO_OID) if spnego else None
    return gssapi.SecurityContext(name=target, creds=credentials(login), usage="initiate", flags=flags, mech=mech)


# -- the security layer ----------------------------------------------------------------------------------


def choose_layer(offer: bytes, qop: Qop, remedy: str) -> bytes:
    """The client's (unwrapped) answer to the server's (unwrapped) security-layer ``offer``: ``u8``
    :data:`QOP_BIT` of ``qop`` + ``u24`` BE :data:`MAX_BUFFER`. Raises
    :class:`~pipeline.errors.HBaseAuthError` when the offer is not 4 bytes, or does not include ``qop``
    (the message names both sides and ends with ``remedy``)."""
    if len(offer) != 4:
        raise HBaseAuthError(f"the server's SASL security-layer offer is {len(offer)} bytes, not 4")
    bit = QOP_BIT[qop]
    if not offer[0] & bit:
        offered = ", ".join(q for q, b in QOP_BIT.items() if offer[0] & b) or "none"
        raise HBaseAuthError(f"the client asks for QOP {qop}, the server is offering ({offered}): {remedy}")
    return bytes([bit]) + MAX_BUFFER.to_bytes(3, "big")


class GssSession:
    """One SASL GSSAPI login as ``login`` to ``<login.service>@<host>``, driven by a transport:
    :meth:`start` gives the first token, :meth:`respond` answers each server token until :attr:`complete`
    (the security layer is settled), then :meth:`wrap`/:meth:`unwrap` protect messages when
    :attr:`wraps`. ``peer`` names the server in errors; ``remedy`` ends the error of a QOP the server does
    not offer (which setting to change)."""

    def __init__(self, login: Login, host: str, *, peer: str, remedy: str) -> None:
        self.login = login
        self.host = host
        self.peer = peer
        self._remedy = remedy
        self._ctx: Any = None
        self._complete = False

    def __repr__(self) -> str:
        state = "complete" if self._complete else "started" if self._ctx is not None else "new"
        return f"GssSession({self.login.service}@{self.host}, qop={self.login.qop}, {state})"

    @property
    def complete(self) -> bool:
        """Whether the security layer is settled (the last token to send was returned by :meth:`respond`)."""
        return self._complete

    @property
    def wraps(self) -> bool:
        """Whether messages are wrapped (``auth-int``, ``auth-conf``) rather than sent as they are."""
        return self.login.qop != "auth"

    @property
    def principal(self) -> str:
        """The client's principal as the KDC knows it (``user@REALM``); once :meth:`start` succeeded."""
        return str(self._ctx.initiator_name)

    def start(self) -> bytes:
        """The first token (a Kerberos AP-REQ for the service). Blocks on the KDC (credentials, service
        ticket): call it from a worker thread in async code. Raises per the module docstring."""
        try:
            self._ctx = gss_context(self.login, self.login.service, self.host)
            token: bytes | None = self._ctx.step()
        except (HBaseAuthError, HBaseUnavailable):
            raise
        except Exception as exc:
            if not is_gss_error(exc):
                raise
            raise auth_failure(f"Kerberos service ticket for {self.login.service}/{self.host} ({self.peer})",
                               exc) from exc
        return token or b""

    def respond(self, challenge: bytes) -> bytes:
        """The answer to the server's ``challenge``: the next context token (empty once the context is
        established, as Java's client sends it), or, once it is, the wrapped choice of the security layer
        (then :attr:`complete`). Local work, no KDC. Raises :class:`~pipeline.errors.HBaseAuthError`."""
        ctx = self._ctx
        try:
            if not ctx.complete:
                return ctx.step(challenge) or b""
            offer = ctx.unwrap(challenge).message
        except Exception as exc:
            if not is_gss_error(exc):
                raise
            raise HBaseAuthError(f"the Kerberos reply of {self.peer} did not verify: {gss_reason(exc)}") from exc
        reply = choose_layer(offer, self.login.qop, self._remedy)
        self._complete = True
        return bytes(ctx.wrap(reply, False).message)

    def wrap(self, data: bytes) -> bytes:
        """``data`` signed (``auth-int``) or signed and encrypted (``auth-conf``): one GSSAPI wrap token."""
        return bytes(self._ctx.wrap(data, self.login.qop == "auth-conf").message)

    def unwrap(self, token: bytes) -> bytes:
        """The message of one wrap token from the server (gssapi's error when it does not verify)."""
        return bytes(self._ctx.unwrap(token).message)
