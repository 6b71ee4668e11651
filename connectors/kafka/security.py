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
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiokafka import errors as ak
from aiokafka.conn import create_conn

from connectors.kafka.errors import translate
from pipeline.errors import ConfigError, HBaseIngestError, KafkaAuthError, KafkaError
from pipeline.settings import KafkaSettings

__all__ = ["diagnose", "sasl_password", "ssl_context", "start_client"]


def sasl_password(s: KafkaSettings) -> str | None:
    """The SASL password: ``sasl_plain_password``, else the first line of ``sasl_password_file``."""
    if s.sasl_plain_password is not None:
        return s.sasl_plain_password.get_secret_value()
    if s.sasl_password_file is None:
        return None
    path = Path(s.sasl_password_file)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"[kafka] sasl_password_file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"[kafka] sasl_password_file {str(path)!r} cannot be read: {exc.strerror}") from None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise ConfigError(f"[kafka] sasl_password_file {str(path)!r} is empty")
    return lines[0].strip()


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
    if s.security_protocol.startswith("SASL_"):
        text += f", mechanism {s.sasl_mechanism or 'PLAIN'}, user {s.sasl_plain_username!r}"
    return text + ")"


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
                       sasl_plain_password=sasl_password(s))
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
        return KafkaAuthError(f"{what}: SASL authentication failed at {_listener(s, address)}: the broker "
                              f"refused the user name or password ({type(exc).__name__})")
    except ak.UnsupportedSaslMechanismError:
        return KafkaAuthError(f"{what}: {_listener(s, address)}: the listener does not offer this SASL mechanism")
    except (OSError, TimeoutError, ak.KafkaError):
        return None
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
