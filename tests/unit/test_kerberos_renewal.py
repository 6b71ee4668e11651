"""Renewal of the HBase transports' Kerberos credentials (:func:`connectors.hbase.sasl.credentials`) with a
stand-in for GSSAPI's acquisition and a fake clock: held until :data:`~connectors.hbase.sasl.RENEW_AT` of
their lifetime, then got afresh into the same memory cache; a keytab gone at renewal is a clear error; a
KDC away at renewal keeps the held ticket while it is valid, and is retried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connectors.hbase import sasl
from connectors.hbase.sasl import RENEW_AT, RENEW_RETRY_S, KerberosLogin, credentials
from pipeline.errors import HBaseAuthError, HBaseUnavailable


class GssError(Exception):
    """Stands for gssapi's errors (matched by name of module below)."""

    __module__ = "gssapi.raw.misc"


class Kdc:
    """Stands for ``acquire``: each call is one new ticket of ``lifetime`` seconds, or raises ``fail``."""

    def __init__(self, lifetime: int) -> None:
        self.lifetime = lifetime
        self.fail: Exception | None = None
        self.calls: list[tuple[str | None, str | None, str | None]] = []

    def __call__(self, principal: str | None, keytab: str | None, ccache: str | None = None) -> Any:
        self.calls.append((principal, keytab, ccache))
        if self.fail is not None:
            raise self.fail
        return type("Creds", (), {"lifetime": self.lifetime, "n": len(self.calls)})()


@pytest.fixture
def kdc(monkeypatch: pytest.MonkeyPatch) -> Kdc:
    fake = Kdc(lifetime=100)
    monkeypatch.setattr(sasl, "acquire", fake)
    monkeypatch.setattr(sasl, "_gssapi", lambda: None)
    monkeypatch.setattr(sasl, "keytab_problem", lambda principal, keytab: None)
    monkeypatch.setattr(sasl, "_creds", {})
    return fake


def test_held_until_renew_at_then_got_afresh_into_the_same_cache(kdc: Kdc, tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    keytab.write_bytes(b"\x05\x02")
    login = KerberosLogin("ingest@R", str(keytab))
    first = credentials(login, clock=lambda: 0.0)
    assert credentials(login, clock=lambda: RENEW_AT * 100 - 0.1) is first
    assert len(kdc.calls) == 1
    second = credentials(login, clock=lambda: RENEW_AT * 100)
    assert second is not first and second.n == 2
    assert kdc.calls[0][2] == kdc.calls[1][2] and str(kdc.calls[0][2]).startswith("MEMORY:")
    assert credentials(login, clock=lambda: RENEW_AT * 100 + 1) is second


def test_a_keytab_gone_at_renewal_names_it_and_the_time_left(kdc: Kdc, tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    keytab.write_bytes(b"\x05\x02")
    login = KerberosLogin("ingest@R", str(keytab))
    credentials(login, clock=lambda: 0.0)
    keytab.unlink()
    with pytest.raises(HBaseAuthError) as err:
        credentials(login, clock=lambda: 85.0)
    assert str(err.value) == f"kerberos_keytab {keytab}: no such file (renewing its ticket, which expires in 15 s)"


def test_a_kdc_away_at_renewal_keeps_the_valid_ticket_then_fails_once_it_expired(kdc: Kdc, tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    keytab.write_bytes(b"\x05\x02")
    login = KerberosLogin("ingest@R", str(keytab))
    first = credentials(login, clock=lambda: 0.0)
    kdc.fail = GssError("Cannot contact any KDC for realm 'R'")
    assert credentials(login, clock=lambda: 80.0) is first
    assert credentials(login, clock=lambda: 80.0 + RENEW_RETRY_S - 0.1) is first
    assert len(kdc.calls) == 2  # the next attempt waits RENEW_RETRY_S
    assert credentials(login, clock=lambda: 80.0 + RENEW_RETRY_S) is first
    assert len(kdc.calls) == 3
    with pytest.raises(HBaseUnavailable, match="renewing its ticket, which expires in 0 s"):
        credentials(login, clock=lambda: 100.0)
    kdc.fail = None
    assert credentials(login, clock=lambda: 101.0).n == 5


def test_a_refusal_at_renewal_is_not_hidden_by_the_held_ticket(kdc: Kdc, tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    keytab.write_bytes(b"\x05\x02")
    login = KerberosLogin("ingest@R", str(keytab))
    credentials(login, clock=lambda: 0.0)
    kdc.fail = GssError("Client's credentials have been revoked")
    with pytest.raises(HBaseAuthError, match=r"renewing its ticket, which expires in 20 s.*revoked"):
        credentials(login, clock=lambda: 80.0)


def test_the_ticket_cache_is_read_again_at_renewal(kdc: Kdc) -> None:
    login = KerberosLogin(None, None)
    credentials(login, clock=lambda: 0.0)
    credentials(login, clock=lambda: 90.0)
    assert kdc.calls == [(None, None, None), (None, None, None)]
