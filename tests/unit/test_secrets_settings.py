"""The SASL password never shows in a repr, str or dump of the settings, nor in a configuration error;
it comes from the environment or from a file, never both."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.settings import KafkaSettings, Settings, load_settings

SECRET = "Sup3r-Secret-canary"


def _shown(value: object) -> list[str]:
    texts = [repr(value), str(value), f"{value}", f"{value!r}"]
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        texts += [str(dump()), str(dump(mode="json")), value.model_dump_json()]  # type: ignore[attr-defined]
    return texts


def test_kafka_settings_hide_the_password() -> None:
    s = KafkaSettings(sasl_plain_username="alice", sasl_plain_password=SECRET)
    assert s.sasl_plain_password is not None and s.sasl_plain_password.get_secret_value() == SECRET
    for text in _shown(s):
        assert SECRET not in text
    assert "alice" in repr(s)  # the user name is not a secret: errors and reprs name it


def test_whole_settings_hide_the_password_from_file_and_environment(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(f'[kafka]\nsasl_plain_username = "alice"\nsasl_plain_password = "{SECRET}-file"\n')
    from_file = load_settings(profile)
    monkeypatch.setenv("HBASE_INGEST_KAFKA__SASL_PLAIN_PASSWORD", f"{SECRET}-env")
    from_env = load_settings(None)
    assert from_env.kafka.sasl_plain_password is not None
    assert from_env.kafka.sasl_plain_password.get_secret_value() == f"{SECRET}-env"
    for settings in (from_file, from_env):
        assert isinstance(settings, Settings)
        for text in _shown(settings) + _shown(settings.kafka):
            assert SECRET not in text


def test_configuration_errors_do_not_echo_the_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBASE_INGEST_KAFKA__SASL_PLAIN_PASSWORD", SECRET)
    profile = tmp_path / "p.toml"
    profile.write_text('[kafka]\nsasl_mechanism = "SCRAM-SHA-999"\nsasl_password_file = "/nowhere"\n')
    with pytest.raises(ConfigError) as bad:
        load_settings(profile)
    assert SECRET not in str(bad.value)
    assert "sasl_mechanism" in str(bad.value)


def test_password_from_the_environment_or_a_file_not_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    profile = tmp_path / "p.toml"
    profile.write_text(f'[kafka]\nsasl_password_file = "{secret_file}"\n')
    assert load_settings(profile).kafka.sasl_password_file == secret_file
    monkeypatch.setenv("HBASE_INGEST_KAFKA__SASL_PLAIN_PASSWORD", SECRET)
    with pytest.raises(ConfigError) as both:
        load_settings(profile)
    assert "sasl_password_file" in str(both.value) and SECRET not in str(both.value)


def test_the_oauth_client_secret_is_hidden_and_the_kerberos_keytab_shown_by_path_only(tmp_path: Path) -> None:
    keytab = tmp_path / "ingest.keytab"
    keytab.write_bytes(b"\x05\x02" + SECRET.encode())  # a keytab's contents are keys: never read into settings
    s = load_settings(None, kafka={
        "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_endpoint_url": "https://idp.example/token", "sasl_oauth_client_id": "ingest",
        "sasl_oauth_client_secret": SECRET}, hbase={
        "auth": "kerberos", "kerberos_principal": "ingest@R", "kerberos_keytab": str(keytab)})
    assert s.kafka.sasl_oauth_client_secret is not None
    assert s.kafka.sasl_oauth_client_secret.get_secret_value() == SECRET
    texts = _shown(s) + _shown(s.kafka) + _shown(s.hbase)
    for text in texts:
        assert SECRET not in text
    assert any(str(keytab) in text for text in _shown(s.hbase))  # the path may be shown, never the keys
