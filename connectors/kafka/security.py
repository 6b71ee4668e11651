"""The security side of a Kafka client: its SASL password, its TLS context, and why a secured
connection failed.

aiokafka swallows the cause when a client cannot bootstrap (a wrong password, a certificate that
does not verify) and raises only ``Unable to bootstrap from [...]``, which reads like an unreachable
broker and would be retried for ever. :func:`start_client` starts a client and, when that happens on a
SASL or SSL listener, opens one connection itself the way aiokafka does to learn the cause, and raises
:class:`~pipeline.errors.KafkaAuthError` (not retryable) naming the bootstrap address, the listener's
protocol, the mechanism, the user and the CA file, never the password.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiokafka import errors as ak
from aiokafka.conn import create_conn

from connectors.kafka.errors import translate
from connectors.kafka.kerberos import kerberos_login
from connectors.kafka.oauth import FileTokenProvider, token_expiry, token_provider
from connectors.kafka.secretfile import first_line
from connectors.kerberos import gss_reason, is_gss_error
from pipeline.errors import ConfigError, HBaseIngestError, KafkaAuthError, KafkaError
from pipeline.settings import KafkaSettings

__all__ = ["diagnose", "sasl_options", "sasl_password", "ssl_context", "start_client"]


def sasl_options(s: KafkaSettings) -> dict[str, object]:
    """aiokafka's options for GSSAPI (service and host names of the broker's principal, after
    :func:`~connectors.kafka.kerberos.kerberos_login`) or OAUTHBEARER (the token provider); empty for the
    other mechanisms."""
    if s.sasl_mechanism == "GSSAPI":
        kerberos_login(s)
        return {"sasl_kerberos_service_name": s.sasl_kerberos_service_name,
                "sasl_kerberos_domain_name": s.sasl_kerberos_domain_name}
    if s.sasl_mechanism == "OAUTHBEARER":
        return {"sasl_oauth_token_provider": token_provider(s)}
    return {}


def sasl_password(s: KafkaSettings) -> str | None:
    """The SASL password: ``sasl_plain_password``, else the first line of ``sasl_password_file``."""
    if s.sasl_plain_password is not None:
        return s.sasl_plain_password.get_secret_value()
    if s.sasl_password_file is None:
        return None
    return first_line(Path(s.sasl_password_file), "sasl_password_file", ConfigError)


def ssl_context(s: KafkaSettings) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL client: the system's CAs, or ``ssl_cafile`` alone."""
    cafile = s.ssl_cafile
    if cafile is not None and not Path(cafile).is_file():
        raise ConfigError(f"[kafka] ssl_cafile {cafile!r} does not exist (or is not a file)")
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"[kafka] ssl_cafile {cafile!r} holds no readable PEM certificate ({exc})") from None
    if s.ssl_certfile:
        try:
            ctx.load_cert_chain(s.ssl_certfile, s.ssl_keyfile)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"[kafka] ssl_certfile {s.ssl_certfile!r} / ssl_keyfile {s.ssl_keyfile!r} "
                              f"could not be loaded ({exc})") from None
    return ctx


def _listener(s: KafkaSettings, address: str) -> str:
    text = f"{address} (listener protocol {s.security_protocol}"
    if s.sasl_mechanism == "GSSAPI":
        host = s.sasl_kerberos_domain_name or address.rpartition(":")[0]
        who = s.sasl_kerberos_principal or "the ticket cache's principal"
        text += f", mechanism GSSAPI, principal {who}, broker principal {s.sasl_kerberos_service_name}/{host}"
    elif s.sasl_mechanism == "OAUTHBEARER":
        source = (f"sasl_oauth_token_file {str(s.sasl_oauth_token_file)!r}" if s.sasl_oauth_token_file is not None
                  else f"sasl_oauth_token_endpoint_url {s.sasl_oauth_token_endpoint_url!r}")
        text += f", mechanism OAUTHBEARER, token from {source}"
    elif s.security_protocol.startswith("SASL_"):
        text += f", mechanism {s.sasl_mechanism or 'PLAIN'}, user {s.sasl_plain_username!r}"
    return text + ")"


def _refused(s: KafkaSettings, provider: object) -> str:
    """Why the broker refused the login, as far as the client can tell (never the token itself)."""
    if s.sasl_mechanism == "GSSAPI":
        return "the broker refused the Kerberos login"
    if s.sasl_mechanism != "OAUTHBEARER":
        return "the broker refused the user name or password"
    token = provider.read() if isinstance(provider, FileTokenProvider) else None
    if token is None:
        return "the broker refused the token"
    exp = token_expiry(token)
    if exp is None:
        return "the broker refused the token, which is not a JWT with an exp claim"
    if exp <= time.time():
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))
        return f"the broker refused the token, which expired at {when}"
    return "the broker refused the token (its signature, issuer, audience or scope)"


async def diagnose(s: KafkaSettings, what: str) -> KafkaError | None:
    """Why a client of ``s`` on a secured listener cannot connect: a TLS certificate that does not
    verify, or a refused SASL login, as :class:`KafkaAuthError`; None when one connection to the first
    bootstrap address succeeds or fails otherwise (then the caller's error stands)."""
    if s.security_protocol == "PLAINTEXT":
        return None
    address = s.bootstrap_servers.split(",")[0].strip()
    host, _, port = address.rpartition(":")
    options: dict[str, object] = {}
    if s.security_protocol.startswith("SASL_"):
        options.update(sasl_mechanism=s.sasl_mechanism or "PLAIN", sasl_plain_username=s.sasl_plain_username,
                       sasl_plain_password=sasl_password(s), **sasl_options(s))
    if s.security_protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = ssl_context(s)
    try:
        conn = await asyncio.wait_for(
            create_conn(host, int(port), security_protocol=s.security_protocol, **options),
            s.request_timeout_ms / 1000)
    except ssl.SSLCertVerificationError as exc:
        ca = f"ssl_cafile {s.ssl_cafile!r}" if s.ssl_cafile else "the system's CA certificates (no ssl_cafile)"
        return KafkaAuthError(f"{what}: TLS to {_listener(s, address)}: the broker's certificate did not verify "
                              f"against {ca} ({exc.verify_message})")
    except (ak.SaslAuthenticationFailed, ak.AuthenticationFailedError) as exc:
        refused = _refused(s, options.get("sasl_oauth_token_provider"))
        return KafkaAuthError(f"{what}: SASL authentication failed at {_listener(s, address)}: {refused} "
                              f"({type(exc).__name__})")
    except ak.UnsupportedSaslMechanismError:
        return KafkaAuthError(f"{what}: {_listener(s, address)}: the listener does not offer this SASL mechanism")
    except (OSError, TimeoutError, ak.KafkaError):
        return None
    except HBaseIngestError as exc:
        return exc if isinstance(exc, KafkaError) else None
    except Exception as exc:
        if is_gss_error(exc):
            return _gss_failure(s, address, what, exc)
        raise
    conn.close()
    return None


async def start_client(start: Callable[[], Awaitable[None]], s: KafkaSettings, what: str) -> None:
    """Await ``start()`` (an aiokafka client's ``start``); its failures become the project's errors,
    with the cause of a failed bootstrap on a secured listener found by :func:`diagnose`."""
    try:
        await start()
    except HBaseIngestError:
        raise
    except (ak.KafkaError, OSError, TimeoutError) as exc:
        if isinstance(exc, ak.KafkaConnectionError):
            found = await diagnose(s, what)
            if found is not None:
                raise found from None
        raise translate(exc, what) from exc
    except Exception as exc:
        if not is_gss_error(exc):
            raise
        raise _gss_failure(s, s.bootstrap_servers.split(",")[0].strip(), what, exc) from None


def _gss_failure(s: KafkaSettings, address: str, what: str, exc: BaseException) -> KafkaAuthError:
    """GSSAPI failed on the client's side while logging in (no ticket for the broker's principal, a KDC that
    does not answer): aiokafka lets gssapi's error through unwrapped."""
    return KafkaAuthError(f"{what}: Kerberos (GSSAPI) login failed at {_listener(s, address)}: {gss_reason(exc)}")
