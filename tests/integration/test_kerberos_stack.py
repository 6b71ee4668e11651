"""The Kerberos part of the real stack (``stack up --kerberos``): the KDC issues tickets from the keytabs,
the Kerberized HBase answers through its SASL (QOP auth-conf) Thrift1 gateway as the client principal,
and its HTTPS gateway answers with SPNEGO and refuses a request without credentials."""

from __future__ import annotations

import socket
import ssl
import uuid

import gssapi
import pytest
from Hbase_thrift import ColumnDescriptor, Mutation

from connectors.hbase import transport
from connectors.hbase.transport import GssapiSasl, credentials, open_thrift1
from devstack import LocalStack
from devstack.kerberos import KerberosPart, kinit_check
from devstack.krb_client import gateway_ports, gateway_security, https_status_without_credentials
from pipeline.errors import StackError


@pytest.fixture
def part(kerberos_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> KerberosPart:
    """The Kerberos part, with this test's process pointed at its realm (``KerberosPart.env``)."""
    found = kerberos_stack.kerberos
    assert found is not None
    for key, value in found.env().items():
        monkeypatch.setenv(key, value)
    return found


def test_the_kdc_issues_tickets_from_the_keytabs(part: KerberosPart) -> None:
    kinit_check(part)
    kinit_check(part, part.stranger_principal, part.stranger_keytab)
    with pytest.raises(StackError, match="kinit"):  # a keytab holds the keys of its own principal only
        kinit_check(part, part.stranger_principal, part.client_keytab)
    creds = credentials(gateway_security(part, "sasl"))
    ctx = gssapi.SecurityContext(name=gssapi.Name(f"hbase@{part.host}", gssapi.NameType.hostbased_service),
                                 creds=creds, usage="initiate")
    assert ctx.step()  # a service ticket for hbase/localhost: the first token of the exchange
    assert str(creds.name) == part.client_principal


def test_a_thrift1_call_over_sasl_with_auth_conf(part: KerberosPart, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[tuple[int, int]] = []
    real_encode = GssapiSasl.encode

    def spy(self: GssapiSasl, data: bytes) -> tuple[bool, bytes]:
        ok, out = real_encode(self, data)
        sizes.append((len(data), len(out)))
        return ok, out

    monkeypatch.setattr(transport.GssapiSasl, "encode", spy)
    conn = open_thrift1(part.host, gateway_ports(part, "sasl")[0], 10_000, "buffered", "binary",
                        gateway_security(part, "sasl"))
    client = conn.client
    table = f"krb_{uuid.uuid4().hex[:10]}".encode()
    try:
        client.createTable(table, [ColumnDescriptor(name=b"d:", maxVersions=1)])
        client.mutateRow(table, b"row-1", [Mutation(column=b"d:v", value=b"sealed")], {})
        cells = client.getRow(table, b"row-1", {})
        assert [(c.row, c.columns[b"d:v"].value) for c in cells] == [(b"row-1", b"sealed")]
        assert table in client.getTableNames()
        client.disableTable(table)
        client.deleteTable(table)
    finally:
        conn.close()
    # every message went out wrapped (auth-conf: sealed by GSSAPI, with a length header): longer than sent
    assert sizes and all(out > data + 4 for data, out in sizes)


def test_the_https_gateway_answers_spnego_and_refuses_no_credentials(part: KerberosPart) -> None:
    assert https_status_without_credentials(part, 1) == 401
    assert https_status_without_credentials(part, 2) == 401
    conn = open_thrift1(part.host, gateway_ports(part, "https")[0], 10_000, "http", "binary",
                        gateway_security(part, "https"))
    try:
        assert isinstance(conn.client.getTableNames(), list)
    finally:
        conn.close()


def test_the_https_gateway_is_verified_against_the_stacks_ca(part: KerberosPart) -> None:
    context = ssl.create_default_context()  # the system's CAs only: the stack's certificate is not trusted
    with socket.create_connection(("127.0.0.1", part.https_thrift1_port), 5) as sock, \
            pytest.raises(ssl.SSLCertVerificationError):
        context.wrap_socket(sock, server_hostname=part.host)
    with socket.create_connection(("127.0.0.1", part.https_thrift1_port), 5) as sock, \
            ssl.create_default_context(cafile=str(part.ca_file)).wrap_socket(sock, server_hostname=part.host) as tls:
        assert tls.version() is not None
