"""The ``[hbase]`` keys of the Kerberized stack's gateways (devstack.krb_client.hbase_keys) are
the settings spelling of ``gateway_security``: a client made from them reaches the gateway the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.hbase.transport import security_of
from devstack.kerberos import KerberosPart
from devstack.krb_client import GatewayKind, gateway_security, hbase_keys
from pipeline.settings import HBaseSettings

PART = KerberosPart("HBASE-INGEST.TEST", Path("/k"), 8890, 9690, 9691, 9692, 9693, 9694, 9695, Path("/k/ca.pem"))


@pytest.mark.parametrize("kind", ["plain", "sasl", "https"])
def test_the_keys_give_the_gateways_security(kind: GatewayKind) -> None:
    keys = hbase_keys(PART, kind)
    settings = HBaseSettings.model_validate(keys)
    spec = settings.endpoints()[0]
    assert (spec.host, spec.port, spec.thrift2_port) == ("localhost", *{"plain": (9690, 9691), "sasl": (9692, 9693),
                                                                          "https": (9694, 9695)}[kind])
    assert security_of(spec, settings) == gateway_security(PART, kind)
