"""The native RPC client against the Kerberized HBase of ``stack up --kerberos`` (its servers accept every
QOP: ``hbase.rpc.protection = authentication,integrity,privacy``): at each QOP, rows written over HBase's
own RPC (SASL GSSAPI to the master and the region server) read back natively and through the SASL Thrift
gateway, with the payload unreadable on the wire under auth-conf, and once over TLS (the servers'
``hbase.server.netty.tls.enabled``, plaintext still accepted); a login that cannot work, or a certificate
that does not verify, is a clear :class:`~pipeline.errors.HBaseAuthError` naming the server and the
cause, at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.tls import TLSStream

from connectors.hbase import HBaseClient, sasl
from connectors.hbase.native import NativeClient
from connectors.hbase.sasl import GssSession, KerberosLogin
from devstack import LocalStack
from devstack.kerberos import KerberosPart
from pipeline.core.model import Mutation, MutationKind, Origin
from pipeline.core.model import TopicPartition as TP
from pipeline.errors import HBaseAuthError
from pipeline.settings import FamilySpec, GatewaySpec, HBaseSettings

from .secure_support import make_ca

ROWS = 300
T0 = 1_700_000_000_000
ORIGIN = Origin(TP("native-kerberos", 0), 0)


def _settings(stack: LocalStack, k: KerberosPart, client: str, qop: sasl.Qop, *, tls: bool = False,
              ca_file: Path | None = None) -> HBaseSettings:
    """The ``[hbase]`` keys of a client of the Kerberized HBase: ``qop`` for the native RPC (``tls``: over
    TLS, checked with ``ca_file``, else the stack's CA), the SASL gateway (table admin, the Thrift
    read-back) at its own auth-conf."""
    return HBaseSettings.model_validate({
        "auth": "kerberos", "kerberos_principal": k.client_principal, "kerberos_keytab": k.client_keytab,
        "sasl_qop": qop, "client": client, "masters": [f"{k.host}:{stack.settings.kerberos_master_port}"],
        "rpc_tls": tls and client == "native", "tls_ca_file": ca_file or k.ca_file,
        "gateways": [GatewaySpec(host=k.host, port=k.sasl_thrift1_port, thrift2_port=k.sasl_thrift2_port,
                                 sasl_qop="auth-conf")]})


@pytest.mark.parametrize(("qop", "tls"), [("auth", False), ("auth-int", False), ("auth-conf", False),
                                          ("auth", True)], ids=["auth", "auth-int", "auth-conf", "tls+auth"])
async def test_native_writes_read_back_at_each_qop(kerberos_stack: LocalStack, krb: KerberosPart, unique: str,
                                                   qop: sasl.Qop, tls: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tls+auth``: TLS on the RPC port (``rpc_tls``; the servers' ``hbase.server.netty.tls.enabled``)
    with a SASL login that only authenticates, as clusters with TLS do."""
    wire: list[tuple[bytes, bytes]] = []  # (plaintext, wrap token) of every message the client wrapped
    real_wrap = GssSession.wrap
    handshakes: list[str] = []
    real_tls = TLSStream.wrap

    async def tls_spy(*args: Any, **kwargs: Any) -> TLSStream:
        handshakes.append(kwargs["hostname"])
        return await real_tls(*args, **kwargs)

    monkeypatch.setattr(TLSStream, "wrap", tls_spy)

    def spy(self: GssSession, data: bytes) -> bytes:
        wrapped = real_wrap(self, data)
        wire.append((data, wrapped))
        return wrapped

    monkeypatch.setattr(GssSession, "wrap", spy)
    table = f"native_krb_{qop.replace('-', '_')}_{'tls_' if tls else ''}{unique}"
    marker = b"secret-%s-" % unique.encode()
    puts = [Mutation(table, b"r%04d" % i, MutationKind.PUT, {b"d:v": marker + b"%d" % i}, T0 + i, ORIGIN)
            for i in range(ROWS)]
    expected = [(m.row, {b"d:v": (m.cells[b"d:v"], m.timestamp)}) for m in puts]
    async with HBaseClient(_settings(kerberos_stack, krb, "native", qop, tls=tls)) as native, \
            HBaseClient(_settings(kerberos_stack, krb, "thrift", qop)) as thrift:
        await thrift.create_table(table, {"d": FamilySpec()}, [b"r0100", b"r0200"])
        try:
            with anyio.fail_after(120):
                await native.write(table, puts)
                read = await native.scan_cells(table, limit=ROWS + 10)  # over the native RPC
            assert [(k, {c: (v.value, v.timestamp) for c, v in cells.items()}) for k, cells in read] == expected
            gateway = await thrift.scan_cells(table, limit=ROWS + 10)
            assert [(k, {c: (v.value, v.timestamp) for c, v in cells.items()}) for k, cells in gateway] == expected
            assert native.statistics()["native"]["actions_sent"] >= ROWS
        finally:
            await thrift.delete_table(table)
    assert len(handshakes) == (2 if tls else 0)  # the master's registry and the region server (the one JVM)
    ours = [(plain, token) for plain, token in wire if marker in plain]
    if qop == "auth":
        assert not ours  # nothing is wrapped
    else:
        assert ours, "the puts went out in wrapped packets"
        if qop == "auth-conf":
            assert not any(marker in token for _, token in ours)  # encrypted: the payload is not on the wire
        else:
            assert all(marker in token for _, token in ours)  # integrity only: signed, readable


@pytest.mark.parametrize(("case", "expected"), [
    ("stranger-keytab", "holds no key of {client}"),
    ("missing-keytab", "no such file"),
    ("not-the-servers-service", "refused the Kerberos login: javax.security.sasl.SaslException"),
])
async def test_a_login_that_cannot_work_is_a_clear_auth_error(kerberos_stack: LocalStack, krb: KerberosPart,
                                                              tmp_path: Path, case: str, expected: str) -> None:
    login = {
        "stranger-keytab": KerberosLogin(krb.client_principal, str(krb.stranger_keytab)),
        "missing-keytab": KerberosLogin(krb.client_principal, f"{tmp_path}/nowhere.keytab"),
        # a ticket for HTTP/localhost (a principal the KDC knows) handed to the HBase master, whose keytab
        # cannot read it: the server's own refusal
        "not-the-servers-service": KerberosLogin(krb.client_principal, str(krb.client_keytab), "HTTP"),
    }[case]
    master = f"{krb.host}:{kerberos_stack.settings.kerberos_master_port}"
    with anyio.fail_after(60):  # no retry loop, no hang: the first connection's login decides
        async with NativeClient([master], connect_timeout_s=10.0, timeout_s=10.0, kerberos=login) as client:
            with pytest.raises(HBaseAuthError) as caught:
                await client.regions("any_table")
    text = str(caught.value)
    assert f"HBase at {master}" in text, text
    assert expected.format(client=krb.client_principal) in text, text


async def test_rpc_tls_with_the_wrong_ca_is_refused_at_once(kerberos_stack: LocalStack, krb: KerberosPart,
                                                           tmp_path: Path) -> None:
    other = make_ca(tmp_path)
    settings = _settings(kerberos_stack, krb, "native", "auth", tls=True, ca_file=other)
    with anyio.fail_after(60):
        async with HBaseClient(settings) as client:
            with pytest.raises(HBaseAuthError, match=r"HBase at localhost:\d+: its certificate does not verify"):
                await client.regions("any_table")
