"""A Kafka GSSAPI login that fails mid-run (connectors.kafka.errors.map_errors with
connectors.kafka.kerberos.login_problem): aiokafka's generic errors, or gssapi's own escaping it, become
one KafkaAuthError naming the cause: the installed identity's keytab gone, else GSSAPI's reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka import errors as ak

from connectors.kafka import kerberos
from connectors.kafka.errors import map_errors
from pipeline.errors import KafkaAuthError, KafkaError, KafkaUnavailable


class GssError(Exception):
    """Stands for gssapi's errors (recognised by their module)."""

    __module__ = "gssapi.raw.misc"

    def gen_message(self) -> str:
        return "Unspecified GSS failure"

    @property
    def min_message(self) -> str:
        return "Ticket expired"


class KdcAway(GssError):
    @property
    def min_message(self) -> str:
        return "Cannot contact any KDC for realm 'R'"


def _raise(exc: BaseException, cause: BaseException | None = None) -> None:
    with map_errors("fetching records"):
        raise exc from cause


def test_a_gssapi_error_escaping_aiokafka_names_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kerberos, "_installed", None)
    with pytest.raises(KafkaAuthError) as err:
        _raise(GssError())
    assert str(err.value) == "fetching records: the Kerberos login failed: Unspecified GSS failure: Ticket expired"
    with pytest.raises(KafkaAuthError, match="login failed: Unspecified GSS failure: Ticket expired"):
        _raise(ak.KafkaError("Unexpected error during data retrieval"), GssError())


def test_a_keytab_gone_is_named_whatever_aiokafka_made_of_the_failure(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    keytab = tmp_path / "ingest.keytab"
    monkeypatch.setattr(kerberos, "_installed", ("ingest@R", str(keytab)))
    with pytest.raises(KafkaAuthError) as err:  # the coordinator's copy of the GSSAPI error lost its cause
        _raise(ak.KafkaError("Unexpected error during coordination TypeError('...')"))
    assert str(err.value) == (f"fetching records: the Kerberos login of ingest@R cannot get a new ticket: its keytab "
                              f"'{keytab}' (sasl_kerberos_keytab) is gone")


def test_other_failures_keep_their_mapping_while_the_keytab_is_there(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    keytab = tmp_path / "ingest.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setattr(kerberos, "_installed", ("ingest@R", str(keytab)))
    with pytest.raises(KafkaUnavailable):
        _raise(ak.KafkaConnectionError("Connection at 127.0.0.1:9096 closed"))
    with pytest.raises(KafkaError):
        _raise(ak.KafkaError("Unexpected error during data retrieval"))
    with pytest.raises(ValueError, match="a bug"):  # not ours, not gssapi's: a bug keeps its traceback
        _raise(ValueError("a bug"))


def test_a_kdc_that_does_not_answer_is_retried_not_fatal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keytab = tmp_path / "ingest.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setattr(kerberos, "_installed", ("ingest@R", str(keytab)))
    with pytest.raises(KafkaUnavailable, match=r"the Kerberos login of ingest@R failed: .*Cannot contact any KDC"):
        _raise(KdcAway())
