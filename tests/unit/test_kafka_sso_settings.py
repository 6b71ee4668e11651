"""GSSAPI and OAUTHBEARER settings of ``[kafka]`` that cannot work are refused naming the key; the token
providers read a rotated file and cache a client-credentials token until shortly before it expires."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import ValidationError

from connectors.kafka.oauth import ClientCredentialsProvider, FileTokenProvider, token_provider
from devstack.krb_kafka import unsecured_token
from pipeline.errors import KafkaAuthError
from pipeline.settings import KafkaSettings

SASL = {"security_protocol": "SASL_SSL"}


@pytest.mark.parametrize(("values", "named"), [
    ({"sasl_mechanism": "OAUTHBEARER"}, "sasl_oauth_token_file"),
    ({"sasl_mechanism": "GSSAPI", "sasl_kerberos_keytab": "k.keytab"}, "sasl_kerberos_principal"),
    ({"sasl_mechanism": "GSSAPI", "sasl_kerberos_principal": "u@R"}, "sasl_kerberos_keytab"),
    ({"sasl_mechanism": "SCRAM-SHA-512", "sasl_oauth_token_file": "t"}, "sasl_oauth_token_file"),
    ({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_endpoint_url": "https://idp/token"}, "sasl_oauth_client_id"),
    ({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_endpoint_url": "https://idp/token",
      "sasl_oauth_client_id": "c"}, "sasl_oauth_client_secret"),
    ({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_file": "t", "sasl_oauth_client_id": "c"},
     "sasl_oauth_token_endpoint_url"),
])
def test_settings_that_cannot_work_are_refused_naming_the_key(values: dict[str, str], named: str) -> None:
    with pytest.raises(ValidationError) as err:
        KafkaSettings.model_validate({**SASL, **values})
    assert named in str(err.value)


def test_gssapi_on_plaintext_is_refused() -> None:
    with pytest.raises(ValidationError, match="security_protocol"):
        KafkaSettings(sasl_mechanism="GSSAPI")


def test_client_secret_is_never_shown() -> None:
    s = KafkaSettings.model_validate({**SASL, "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_client_id": "c",
                                      "sasl_oauth_token_endpoint_url": "https://idp/token",
                                      "sasl_oauth_client_secret": "s3cr3t-value"})
    assert "s3cr3t-value" not in repr(s) and "s3cr3t-value" not in str(s.model_dump())
    assert "s3cr3t-value" not in repr(token_provider(s))


def test_file_provider_rereads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    first, second = unsecured_token("a"), unsecured_token("b")
    path.write_text(first + "\n")
    provider = FileTokenProvider(path)
    assert asyncio.run(provider.token()) == first
    path.write_text(second + "\n")
    assert asyncio.run(provider.token()) == second
    path.write_text(unsecured_token(lifetime_s=-10))
    with pytest.raises(KafkaAuthError, match="expired at"):
        asyncio.run(provider.token())
    path.write_text("garbage\n")
    with pytest.raises(KafkaAuthError, match="does not hold a JWT") as err:
        asyncio.run(provider.token())
    assert "garbage" not in str(err.value)


class _Endpoint(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[str, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _Endpoint.calls.append((self.headers.get("Authorization", ""), body))
        ok = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"client:secret").decode()
        payload = ({"access_token": f"tok-{len(_Endpoint.calls)}", "expires_in": 120} if ok
                   else {"error": "invalid_client"})
        data = json.dumps(payload).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.calls = []
    server = HTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/token"
    server.shutdown()
    server.server_close()


def test_client_credentials_token_is_cached_until_shortly_before_expiry(endpoint: str) -> None:
    now = [1000.0]
    provider = ClientCredentialsProvider(endpoint, "client", lambda: "secret", scope="kafka", clock=lambda: now[0])

    async def go() -> list[str]:
        got = [await provider.token(), await provider.token()]
        now[0] += 59  # 120 s lifetime, renewed 60 s before its end
        got.append(await provider.token())
        now[0] += 2
        got.append(await provider.token())
        return got

    assert asyncio.run(go()) == ["tok-1", "tok-1", "tok-1", "tok-2"]
    assert "grant_type=client_credentials" in _Endpoint.calls[0][1] and "scope=kafka" in _Endpoint.calls[0][1]


def test_refused_client_names_endpoint_and_status_not_secret(endpoint: str) -> None:
    provider = ClientCredentialsProvider(endpoint, "client", lambda: "wrong-secret")
    with pytest.raises(KafkaAuthError, match="HTTP 401 \\(invalid_client\\)") as err:
        asyncio.run(provider.token())
    assert endpoint in str(err.value) and "wrong-secret" not in str(err.value)
