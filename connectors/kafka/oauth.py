"""OAUTHBEARER token providers for aiokafka (``sasl_oauth_token_provider``), built from
:class:`~pipeline.settings.KafkaSettings` by :func:`token_provider`:

- :class:`FileTokenProvider` (``sasl_oauth_token_file``): the token is the file's first line, read again at
  every login, so that a sidecar (a Kubernetes projected token, a vault agent) can replace the file;
- :class:`ClientCredentialsProvider` (``sasl_oauth_token_endpoint_url``, ``sasl_oauth_client_id``,
  ``sasl_oauth_client_secret`` or ``sasl_oauth_client_secret_file``, ``sasl_oauth_scope``): the OAuth 2
  client-credentials grant (RFC 6749 4.4; the client authenticates with HTTP Basic), the access token kept
  until :data:`REFRESH_MARGIN_S` before its ``expires_in`` runs out (:data:`DEFAULT_LIFETIME_S` when the
  endpoint gives none), then fetched again.

Neither the token nor the client secret is ever logged or put in an error message. A token source that
fails raises :class:`~pipeline.errors.KafkaAuthError` naming the key (the file, the endpoint) and why.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from aiokafka.abc import AbstractTokenProvider

from connectors.kafka.secretfile import first_line
from pipeline.errors import ConfigError, KafkaAuthError
from pipeline.settings import KafkaSettings

__all__ = ["DEFAULT_LIFETIME_S", "REFRESH_MARGIN_S", "ClientCredentialsProvider", "FileTokenProvider",
           "token_expiry", "token_provider"]

#: a cached token is fetched again this long before it expires
REFRESH_MARGIN_S = 60.0
#: the lifetime assumed when the token endpoint's answer has no ``expires_in``
DEFAULT_LIFETIME_S = 300.0


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim (seconds since the epoch) of a JWT, None when ``token`` is not a JWT with one.
    Reads the claims without checking any signature: it only words error messages."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class FileTokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka is untyped
    """The token in ``path`` (its first line), read at every call: a rotated file is picked up at the next
    login. Raises :class:`KafkaAuthError` when the file is missing, unreadable or empty."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileTokenProvider(path={str(self.path)!r})"

    def read(self) -> str:
        return first_line(self.path, "sasl_oauth_token_file", KafkaAuthError)

    def checked(self) -> str:
        """:meth:`read`, refusing a token Kafka's validators would refuse: not a JWT with an ``exp`` claim, or
        expired. Checked here because aiokafka (0.14) ignores the broker's error challenge to a refused token
        and goes on as if logged in, so the refusal would never surface."""
        token = self.read()
        exp = token_expiry(token)
        where = f"[kafka] sasl_oauth_token_file {str(self.path)!r}"
        if exp is None:
            raise KafkaAuthError(f"{where} does not hold a JWT with an exp claim (Kafka's OAUTHBEARER needs one)")
        if exp <= time.time():
            raise KafkaAuthError(f"{where} holds a token that expired at "
                                 f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(exp))}; the token file was not "
                                 "renewed")
        return token

    async def token(self) -> str:
        return await asyncio.to_thread(self.checked)


class ClientCredentialsProvider(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka is untyped
    """Access tokens from an OAuth 2 token endpoint (client-credentials grant), cached until
    :data:`REFRESH_MARGIN_S` before they expire. One request at a time: concurrent logins share it.
    ``clock`` (seconds, monotonic) is for tests. Raises :class:`KafkaAuthError` naming the endpoint when it
    cannot be reached, refuses the client (its HTTP status and OAuth ``error`` code) or answers without
    an ``access_token``."""

    def __init__(self, url: str, client_id: str, secret: Callable[[], str], scope: str | None = None,
                 timeout_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.url, self.client_id, self.scope, self.timeout_s = url, client_id, scope, timeout_s
        self._secret, self._clock = secret, clock
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()
        self.fetches = 0

    def __repr__(self) -> str:
        return f"ClientCredentialsProvider(url={self.url!r}, client_id={self.client_id!r}, scope={self.scope!r})"

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or self._clock() >= self._renew_at:
                self._token, lifetime = await self._fetch()
                self._renew_at = self._clock() + max(lifetime - REFRESH_MARGIN_S, lifetime / 2)
            return self._token

    async def _fetch(self) -> tuple[str, float]:
        what = f"[kafka] sasl_oauth_token_endpoint_url {self.url!r} (client {self.client_id!r})"
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        self.fetches += 1
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                resp = await client.post(self.url, data=form, auth=(self.client_id, self._secret()),
                                         headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise KafkaAuthError(f"{what}: the token endpoint could not be reached ({type(exc).__name__})") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200:
            code = body.get("error") if isinstance(body, dict) else None
            raise KafkaAuthError(f"{what}: the token endpoint refused the client: HTTP {resp.status_code}"
                                 + (f" ({code})" if isinstance(code, str) else ""))
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise KafkaAuthError(f"{what}: the token endpoint's answer holds no access_token")
        expires = body.get("expires_in") if isinstance(body, dict) else None
        lifetime = float(expires) if isinstance(expires, int | float) and expires > 0 else DEFAULT_LIFETIME_S
        return token, lifetime


def token_provider(s: KafkaSettings) -> AbstractTokenProvider | None:
    """The token provider ``s`` asks for (None unless ``sasl_mechanism`` is OAUTHBEARER). Raises
    :class:`ConfigError` when the client secret's file cannot be read."""
    if s.sasl_mechanism != "OAUTHBEARER":
        return None
    if s.sasl_oauth_token_file is not None:
        return FileTokenProvider(s.sasl_oauth_token_file)
    if s.sasl_oauth_token_endpoint_url is None or s.sasl_oauth_client_id is None:
        raise ConfigError('[kafka] sasl_mechanism = "OAUTHBEARER" without a token source')  # settings refuse it
    secret = s.sasl_oauth_client_secret
    secret_file = s.sasl_oauth_client_secret_file
    if secret is not None:
        def read_secret() -> str:
            return secret.get_secret_value()
    elif secret_file is not None:
        first_line(secret_file, "sasl_oauth_client_secret_file", KafkaAuthError)  # a missing file fails at start-up

        def read_secret() -> str:
            return first_line(secret_file, "sasl_oauth_client_secret_file", KafkaAuthError)
    else:
        raise ConfigError("[kafka] sasl_oauth_token_endpoint_url without a client secret")  # settings refuse it
    return ClientCredentialsProvider(s.sasl_oauth_token_endpoint_url, s.sasl_oauth_client_id, read_secret,
                                     s.sasl_oauth_scope, s.request_timeout_ms / 1000)
