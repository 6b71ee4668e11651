"""The transports of connectors.hbase.transport against small in-process Thrift servers speaking HBase's
Thrift1 service: TLS (a CA made here with openssl; a wrong CA is refused with a clear error), HTTP mode (a
401 is a clear error), and the SASL GSSAPI client's security-layer logic with a stand-in GSSAPI context.
The Kerberized gateways themselves are tested against a real KDC and HBase in the integration tests."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import happybase
import pytest
from pydantic import ValidationError
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_server
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TMemoryBuffer

from connectors.hbase import sasl as shared_sasl
from connectors.hbase.transport import GssapiSasl, ThriftSecurity, open_thrift1, security_of
from connectors.kerberos import keytab_principals, keytab_problem
from pipeline.errors import HBaseAuthError
from pipeline.settings import GatewaySpec, HBaseSettings

HBASE = happybase.connection.Hbase


class _Handler:
    def getTableNames(self) -> list[bytes]:
        return [b"t1", b"t2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tls_port(certs: Path) -> Iterator[int]:
    port = _free_port()
    server = make_server(HBASE, _Handler(), "127.0.0.1", port, certfile=str(certs / "server-bundle.pem"))
    threading.Thread(target=server.serve, daemon=True).start()
    for _ in range(200):  # serve() starts listening in its thread
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.01)
    yield port
    server.close()


def test_tls_with_the_right_ca_reaches_the_gateway(certs: Path, tls_port: int) -> None:
    sec = ThriftSecurity(tls=True, ca_file=str(certs / "ca.pem"))
    conn = open_thrift1("localhost", tls_port, 5000, "buffered", "binary", sec)
    try:
        assert conn.client.getTableNames() == [b"t1", b"t2"]
    finally:
        conn.close()


def test_a_certificate_that_does_not_verify_is_a_clear_error(certs: Path, tls_port: int) -> None:
    with pytest.raises(HBaseAuthError, match=r"localhost:\d+'s certificate does not verify: .*unable to get local "
                                             r"issuer certificate"):
        open_thrift1("localhost", tls_port, 5000, "buffered", "binary",
                     ThriftSecurity(tls=True, ca_file=str(certs / "other.pem")))


def test_a_host_name_the_certificate_does_not_name_is_refused_unless_unchecked(certs: Path, tls_port: int) -> None:
    sec = ThriftSecurity(tls=True, ca_file=str(certs / "ca.pem"))
    with pytest.raises(HBaseAuthError, match=r"Hostname mismatch|IP address mismatch"):
        open_thrift1("127.0.0.1", tls_port, 5000, "buffered", "binary", sec)
    conn = open_thrift1("127.0.0.1", tls_port, 5000, "buffered", "binary",
                        ThriftSecurity(tls=True, ca_file=str(certs / "ca.pem"), check_hostname=False))
    conn.close()


class _ThriftOverHttp(http.server.BaseHTTPRequestHandler):
    """HBase's Thrift HTTP mode in small: one POST = one call; with ``need_auth`` a request without an
    ``Authorization`` header gets 401, as SPNEGO does."""

    need_auth = False
    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        type(self).seen.append(dict(self.headers))
        if self.need_auth and "Authorization" not in self.headers:
            self.send_response(401)
            self.send_header("WWW-Authenticate", "Negotiate")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers["Content-Length"]))
        itrans, otrans = TMemoryBuffer(body), TMemoryBuffer()
        factory: Any = TBinaryProtocolFactory()
        TProcessor(HBASE, _Handler()).process(factory.get_protocol(itrans), factory.get_protocol(otrans))
        out = otrans.getvalue()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-thrift")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_gateway() -> Iterator[tuple[int, type[_ThriftOverHttp]]]:
    handler = type("Handler", (_ThriftOverHttp,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], handler
    server.shutdown()


def test_http_mode_posts_each_call_on_one_kept_connection(http_gateway: tuple[int, Any]) -> None:
    port, handler = http_gateway
    conn = open_thrift1("127.0.0.1", port, 5000, "http", "binary", ThriftSecurity(http=True, http_path="/thrift"))
    try:
        assert conn.client.getTableNames() == [b"t1", b"t2"]
        assert conn.client.getTableNames() == [b"t1", b"t2"]
    finally:
        conn.close()
    assert len(handler.seen) == 2
    assert handler.seen[0]["Content-Type"] == "application/x-thrift"


def test_http_401_is_a_clear_error_naming_kerberos(http_gateway: tuple[int, Any]) -> None:
    port, handler = http_gateway
    handler.need_auth = True
    conn = open_thrift1("127.0.0.1", port, 5000, "http", "binary", ThriftSecurity(http=True))
    try:
        with pytest.raises(HBaseAuthError, match=r"refused the request: HTTP 401 Unauthorized \(it wants Kerberos"):
            conn.client.getTableNames()
    finally:
        conn.close()


class _Wrapped:
    def __init__(self, message: bytes) -> None:
        self.message = message


class _StandInContext:
    """A completed GSSAPI context whose wrap/unwrap mark the bytes, to check the SASL layer's framing."""

    complete = True

    def __init__(self) -> None:
        self.encrypted: list[bool] = []

    def step(self, token: bytes | None = None) -> bytes:
        return b"initial"

    def wrap(self, data: bytes, encrypt: bool) -> _Wrapped:
        self.encrypted.append(encrypt)
        return _Wrapped(b"W" + data)

    def unwrap(self, data: bytes) -> _Wrapped:
        assert data[:1] == b"W"
        return _Wrapped(data[1:])


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> _StandInContext:
    ctx = _StandInContext()
    monkeypatch.setattr(shared_sasl, "gss_context", lambda login, service, host, spnego=False: ctx)
    return ctx


def test_sasl_chooses_the_asked_qop_and_wraps_every_message(stand_in: _StandInContext) -> None:
    sasl = GssapiSasl(ThriftSecurity(kerberos=True, qop="auth-conf"), "localhost")
    assert sasl.start("GSSAPI") == (True, "GSSAPI", b"initial")
    ok, reply = sasl.step(b"W" + bytes([1 | 2 | 4]) + (65536).to_bytes(3, "big"))
    assert ok and reply == b"W" + bytes([4]) + (0xFFFFFF).to_bytes(3, "big")
    ok, framed = sasl.encode(b"message")
    assert ok and framed == (8).to_bytes(4, "big") + b"Wmessage"
    assert stand_in.encrypted[-1] is True  # auth-conf encrypts
    assert sasl.decode(framed) == (True, b"message")


def test_sasl_auth_sends_messages_as_they_are(stand_in: _StandInContext) -> None:
    sasl = GssapiSasl(ThriftSecurity(kerberos=True, qop="auth"), "localhost")
    sasl.start("GSSAPI")
    assert sasl.step(b"W" + bytes([1]) + (65536).to_bytes(3, "big"))[0]
    assert sasl.encode(b"message") == (True, b"message")


def test_a_qop_the_gateway_does_not_offer_names_both(stand_in: _StandInContext) -> None:
    sasl = GssapiSasl(ThriftSecurity(kerberos=True, qop="auth"), "localhost")
    sasl.start("GSSAPI")
    assert sasl.step(b"W" + bytes([4]) + (65536).to_bytes(3, "big")) == (False, b"")
    assert sasl.getError() == ("the client asks for QOP auth, the server is offering (auth-conf): set sasl_qop "
                               "to match hbase.thrift.security.qop")


def test_each_gateway_takes_the_hbase_keys_unless_it_overrides_them() -> None:
    s = HBaseSettings(auth="kerberos", kerberos_principal="ingest@R", kerberos_keytab=Path("/k/ingest.keytab"),
                      tls_ca_file=Path("/k/ca.pem"), sasl_qop="auth-conf",
                      gateways=[GatewaySpec(host="localhost", port=9190, thrift2_port=9191),
                                GatewaySpec(host="localhost", port=9194, thrift2_port=9195, transport="http",
                                            tls=True)])
    sasl, https = (security_of(g, s) for g in s.endpoints())
    assert sasl == ThriftSecurity(kerberos=True, principal="ingest@R", keytab="/k/ingest.keytab",
                                  ca_file="/k/ca.pem", qop="auth-conf")
    assert https.http and https.tls and https.kerberos and https.describe() == "https + SPNEGO HTTP"
    assert sasl.describe() == "plain + SASL GSSAPI hbase qop=auth-conf"


@pytest.mark.parametrize(("keys", "problem"), [
    ({"auth": "kerberos", "transport": "framed"}, "SASL, which frames messages itself"),
    ({"kerberos_keytab": "/k/x.keytab"}, "kerberos_keytab without kerberos_principal"),
    ({"tls_key_file": "/k/key.pem"}, "tls_key_file without tls_cert_file"),
    ({"auth": "kerberos", "gateways": [{"host": "h", "transport": "framed"}]}, r"gateways\[0\]: .*SASL"),
])
def test_security_keys_that_cannot_work_are_refused(keys: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        HBaseSettings(**keys)


def _keytab_entry(realm: str, *components: str) -> bytes:
    body = len(components).to_bytes(2, "big")
    for part in (realm, *components):
        body += len(part).to_bytes(2, "big") + part.encode()
    # name type, timestamp, key version, key type 18 (aes256) and a 32-byte key
    body += (1).to_bytes(4, "big") + bytes(4) + b"\x01" + (18).to_bytes(2, "big") + (32).to_bytes(2, "big") + bytes(32)
    return len(body).to_bytes(4, "big", signed=True) + body


def test_a_keytab_names_the_principals_it_holds(tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    hole = (-8).to_bytes(4, "big", signed=True) + bytes(8)  # a deleted entry
    keytab.write_bytes(b"\x05\x02" + _keytab_entry("R", "hbase", "gw1") + hole + _keytab_entry("R", "ingest")
                       + _keytab_entry("R", "ingest"))
    assert keytab_principals(str(keytab)) == ["hbase/gw1@R", "ingest@R"]
    assert keytab_problem("ingest@R", str(keytab)) is None
    assert keytab_problem("other@R", str(keytab)) == (f"the keytab {keytab} holds no key of other@R "
                                                      "(it holds hbase/gw1@R, ingest@R)")
    (tmp_path / "not.keytab").write_bytes(b"hello")
    assert keytab_principals(str(tmp_path / "not.keytab")) is None
    assert keytab_problem("other@R", str(tmp_path / "not.keytab")) is None
