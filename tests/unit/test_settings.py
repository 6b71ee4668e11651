from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors.hbase.transport import rpc_tls_context
from pipeline.errors import ConfigError, HBaseAuthError
from pipeline.settings import ENV_PREFIX, NON_SETTING_VARIABLES, RouteSpec, Settings, load_settings


@pytest.fixture(autouse=True)
def _no_inherited_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # each test sets the HBASE_INGEST_* variables it needs, and only those
    for var in list(os.environ):
        if var.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(var)


ROUTE = '[[routes]]\nname = "r1"\ntopic = "t"\ntable = "tb"\nrowkey = "[a]"\ncolumns = { "d:a" = "a" }\n'


def test_defaults_load_without_a_file() -> None:
    s = load_settings()
    assert s.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert s.hbase.port == 9090 and s.hbase.thrift2_port == 9091


def test_environment_overrides_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[kafka]\nbootstrap_servers = "a:1"\nclient_id = "x"\n')
    monkeypatch.setenv("HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS", "b:2")
    s = load_settings(f)
    assert s.kafka.bootstrap_servers == "b:2"
    assert s.kafka.client_id == "x"


def test_unknown_key_is_named(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[writer]\nmax_batch_rowz = 5\n")
    with pytest.raises(ConfigError, match=r"writer\.max_batch_rowz: unknown key"):
        load_settings(f)


def test_wrong_value_names_key_and_value(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[hbase]\nport = "ninety"\n')
    with pytest.raises(ConfigError, match=r"hbase\.port: .*integer.*'ninety'"):
        load_settings(f)


def test_route_family_must_exist_in_declared_table(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("""
[[tables]]
name = "t"
families = { d = {} }

[[routes]]
name = "r"
topic = "x"
table = "t"
rowkey = "[a]"
columns = { "x:v" = "a" }
""")
    with pytest.raises(ConfigError, match="route 'r' writes family 'x'"):
        load_settings(f)


def test_secret_is_not_shown(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[kafka]\nsecurity_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                 'sasl_plain_username = "u"\nsasl_plain_password = "hunter2"\n')
    s = load_settings(f)
    assert "hunter2" not in repr(s)
    assert s.kafka.sasl_plain_password is not None
    assert s.kafka.sasl_plain_password.get_secret_value() == "hunter2"


def test_bad_toml_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[kafka\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(f)


# -- unreadable files: a ConfigError naming the file, never a traceback ---------------------------


def test_non_utf8_file_is_named(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_bytes(b'[kafka]\nclient_id = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"c\.toml is not UTF-8 text \(byte 0xe9"):
        load_settings(f)


def test_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a directory; expected a TOML file"):
        load_settings(tmp_path)


def test_missing_include_names_the_including_file(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('include = ["gone.toml"]\n')
    with pytest.raises(ConfigError, match=r"gone\.toml \(included by c\.toml\) does not exist"):
        load_settings(f)


@pytest.mark.parametrize("text", ['[routes]\nname = "r"\n', "tables = 5\n", 'routes = ["r"]\n'])
def test_routes_and_tables_must_be_arrays_of_tables(tmp_path: Path, text: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=r"c\.toml: (routes|tables) must be an array of tables"):
        load_settings(f)


@pytest.mark.parametrize(("text", "where"), [
    ("[runtime]\ngc_threshold0 = 99999999999999999999\n", r"runtime\.gc_threshold0: .*less than or equal to"),
    ("[runtime]\ncpu_affinity = [-1]\n", r"runtime\.cpu_affinity\.0: .*greater than or equal to 0"),
    ("[kafka]\nfetch_max_bytes = 2147483648\n", r"kafka\.fetch_max_bytes: .*less than or equal to"),
    ("[writer]\nretry_max_ms = 99999999999999999999\n", r"writer\.retry_max_ms: .*less than or equal to"),
    ("[writer]\nretry_deadline_s = nan\n", r"writer\.retry_deadline_s: .*finite number"),
    ("[writer]\nshutdown_timeout_s = inf\n", r"writer\.shutdown_timeout_s: .*finite number"),
    (ROUTE.replace('columns = { "d:a" = "a" }', 'counter = { column = "c:n", amount = 9223372036854775808 }'),
     r"routes\.0 \(route 'r1'\)\.counter\.amount: .*less than or equal to 9223372036854775807"),
])
def test_numbers_are_bounded_and_finite(tmp_path: Path, text: str, where: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=where):
        load_settings(f)


def test_shipped_profiles_load() -> None:
    profiles = sorted((Path(__file__).parents[2] / "config").glob("*.toml"))
    assert profiles
    for profile in profiles:
        assert load_settings(profile).routes


# -- environment variables ------------------------------------------------------------------------


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("HBASE_INGEST_RUNTIME__CPU_AFFINITY", "0,1", r"HBASE_INGEST_RUNTIME__CPU_AFFINITY: expected a JSON array "
                                                  r"such as '\[0, 1\]'; the value is not valid JSON"),
    ("HBASE_INGEST_RUNTIME__CPU_AFFINITY", "3", r"HBASE_INGEST_RUNTIME__CPU_AFFINITY: expected a JSON array .*"
                                                r"got a JSON int"),
    ("HBASE_INGEST_HBASE", "notjson", r"HBASE_INGEST_HBASE: expected a JSON object such as '\{\"host\": \.\.\.\}'"),
    ("HBASE_INGEST_HBASE", "[1]", r"HBASE_INGEST_HBASE: expected a JSON object .*got a JSON list"),
])
def test_unparseable_variable_is_named_with_what_was_expected(
        monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=expected):
        load_settings()
    with pytest.raises(ConfigError, match=expected):
        Settings()  # built directly, too


def test_unparseable_section_value_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBASE_INGEST_KAFKA", '{"sasl_plain_password": "hunter2"')
    with pytest.raises(ConfigError, match="HBASE_INGEST_KAFKA: expected a JSON object") as info:
        load_settings()
    assert "hunter2" not in str(info.value)


def test_json_variables_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[hbase]\nhost = "a"\nport = 9000\n')
    monkeypatch.setenv("HBASE_INGEST_RUNTIME__CPU_AFFINITY", "[0, 1]")
    monkeypatch.setenv("HBASE_INGEST_HBASE", '{"host": "b", "pool_size": 2}')
    monkeypatch.setenv("HBASE_INGEST_HBASE__POOL_SIZE", "3")  # a key wins over its section's object
    s = load_settings(f)
    assert s.runtime.cpu_affinity == [0, 1]
    assert (s.hbase.host, s.hbase.port, s.hbase.pool_size) == ("b", 9000, 3)


def test_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBASE_INGEST_HBASE__PORT", "abc")
    monkeypatch.setenv("HBASE_INGEST_KAFKA", '{"client_idd": "x"}')
    with pytest.raises(ConfigError) as info:
        load_settings()
    msg = str(info.value)
    assert "hbase.port (from HBASE_INGEST_HBASE__PORT): Input should be a valid integer" in msg
    assert "kafka.client_idd (from HBASE_INGEST_KAFKA): unknown key; did you mean client_id?" in msg


@pytest.mark.parametrize("value", ["[]", '[{"name": "r2", "topic": "t2", "table": "tb", "rowkey": "[a]", '
                                         '"columns": {"d:a": "a"}}]'])
@pytest.mark.parametrize("var", ["HBASE_INGEST_ROUTES", "HBASE_INGEST_TABLES", "HBASE_INGEST_ROUTES__0__NAME"])
def test_routes_and_tables_come_from_the_file_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(ROUTE)
    monkeypatch.setenv(var, value)
    what = "tables" if "TABLES" in var else "routes"
    with pytest.raises(ConfigError, match=rf"{var}: {what} come from the TOML config file only"):
        load_settings(f)


@pytest.mark.parametrize(("var", "expected"), [
    ("HBASE_INGEST_FOO", r"HBASE_INGEST_FOO: not a setting \(settings are HBASE_INGEST_<SECTION>__<KEY>, "
                         r"SECTION one of KAFKA, HBASE"),
    ("HBASE_INGEST_KAFKA_BOOTSTRAP_SERVERS", r"HBASE_INGEST_KAFKA_BOOTSTRAP_SERVERS: not a setting; did you mean "
                                             r"HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS\? \(a section and its key are "
                                             r"joined by '__'\)"),
    ("HBASE_INGEST_WRITER__MAX_BATCH_ROWZ", r"did you mean HBASE_INGEST_WRITER__MAX_BATCH_ROWS\?"),
    ("HBASE_INGEST_KAFKA__CLIENT_ID__X", r"HBASE_INGEST_KAFKA__CLIENT_ID__X: not a setting"),
    ("HBASE_INGEST_", r"HBASE_INGEST_: not a setting"),
])
def test_misspelt_variable_is_refused_with_the_intended_name(
        monkeypatch: pytest.MonkeyPatch, var: str, expected: str) -> None:
    monkeypatch.setenv(var, "1")
    with pytest.raises(ConfigError, match=expected):
        load_settings()


def test_every_misspelt_variable_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBASE_INGEST_FOO", "1")
    monkeypatch.setenv("HBASE_INGEST_BAR", "1")
    with pytest.raises(ConfigError, match=r"(?s)HBASE_INGEST_BAR: not a setting.*HBASE_INGEST_FOO: not a setting"):
        load_settings()


def test_project_variables_that_are_not_settings_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # read by the local stack (cache, state, infra folders), the Thrift2 client (the IDL file or jar,
    # the repository a missing one is downloaded from) and the compiled parts (the build, the import)
    assert frozenset({"HBASE_INGEST_CACHE", "HBASE_INGEST_STATE", "HBASE_INGEST_INFRA",
                      "HBASE_INGEST_THRIFT2_IDL", "HBASE_INGEST_MAVEN_REPO", "HBASE_INGEST_PURE_PYTHON",
                      "HBASE_INGEST_REQUIRE_COMPILED"}) == NON_SETTING_VARIABLES
    for var in NON_SETTING_VARIABLES:
        monkeypatch.setenv(var, "anything")
    assert load_settings().kafka.bootstrap_servers == "127.0.0.1:9092"


def test_variable_names_are_case_insensitive_but_not_given_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("hbase_ingest_kafka__client_id", "lower")
    assert load_settings().kafka.client_id == "lower"
    monkeypatch.setenv("HBASE_INGEST_KAFKA__CLIENT_ID", "upper")
    with pytest.raises(ConfigError, match=r"the same setting as .*set only one of them"):
        load_settings()


# -- messages -------------------------------------------------------------------------------------


def test_unknown_key_suggests_and_lists_the_valid_ones(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[writer]\nmax_batch_rowz = 5\n")
    with pytest.raises(ConfigError, match=r"writer\.max_batch_rowz: unknown key; did you mean max_batch_rows\? "
                                          r"\(valid keys: max_batch_rows, max_batch_bytes, "):
        load_settings(f)


def test_whole_object_errors_do_not_echo_the_object(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(ROUTE + ROUTE + ROUTE.replace('"r1"', '"r2"').replace('columns = { "d:a" = "a" }', ""))
    with pytest.raises(ConfigError) as info:
        load_settings(f)
    assert str(info.value).endswith("routes.2 (route 'r2'): a route needs columns, or a counter")
    f.write_text(ROUTE + ROUTE)
    with pytest.raises(ConfigError) as info:
        load_settings(f)
    assert str(info.value).endswith("(top level): route names must be unique; repeated: r1")
    assert "got" not in str(info.value)


def test_field_errors_keep_the_given_value(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[hbase]\nport = { a = 1 }\n[kafka]\nmax_poll_records = 0\n")
    with pytest.raises(ConfigError) as info:
        load_settings(f)
    assert "hbase.port: Input should be a valid integer (got 'dict')" in str(info.value)
    assert "kafka.max_poll_records: Input should be greater than or equal to 1 (got 0)" in str(info.value)


def test_a_route_names_the_families_it_writes_once_each_in_column_order() -> None:
    route = RouteSpec.model_validate({"name": "r", "topic": "t", "table": "x", "rowkey": "[id]",
                                      "columns": {"b:x": "x", "a:y": "y", "b:z": "z"},
                                      "counter": {"column": "c:n"}})
    assert route.families == ["b", "a", "c"]


def test_the_native_client_names_its_masters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(None).hbase.client == "thrift"
    monkeypatch.setenv("HBASE_INGEST_HBASE__CLIENT", "native")
    s = load_settings(None)
    assert s.hbase.client == "native" and s.hbase.master_addresses() == ["127.0.0.1:16000"]
    monkeypatch.setenv("HBASE_INGEST_HBASE__MASTERS", '["m1.example:16000", "m2.example:16000"]')
    assert load_settings(None).hbase.master_addresses() == ["m1.example:16000", "m2.example:16000"]
    monkeypatch.delenv("HBASE_INGEST_HBASE__MASTERS")
    f = tmp_path / "c.toml"
    f.write_text('[hbase]\nclient = "native"\nmasters = ["m1.example"]\n')
    with pytest.raises(ConfigError, match=r"hbase\.masters"):
        load_settings(f)
    monkeypatch.delenv("HBASE_INGEST_HBASE__CLIENT")  # else it overrides the file's
    f.write_text('[hbase]\nclient = "grpc"\n')
    with pytest.raises(ConfigError, match=r"hbase\.client"):
        load_settings(f)
    f.write_text('[hbase]\nclient = "native"\nauth = "kerberos"\nsasl_qop = "auth-int"\n')
    native = load_settings(f).hbase
    assert (native.client, native.auth, native.sasl_qop) == ("native", "kerberos", "auth-int")
    f.write_text('[hbase]\nclient = "native"\ngateways = [{ host = "g", auth = "kerberos" }]\n')
    with pytest.raises(ConfigError, match=r'set auth = "kerberos" in \[hbase\]'):
        load_settings(f)


def test_rpc_tls_is_for_the_native_client_and_builds_its_context(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[hbase]\nrpc_tls = true\n")
    with pytest.raises(ConfigError, match=r'rpc_tls .* only client = "native" speaks'):
        load_settings(f)
    f.write_text('[hbase]\nclient = "native"\nrpc_tls = true\ntls_ca_file = "nowhere.pem"\n')
    s = load_settings(f).hbase
    assert rpc_tls_context(s.model_copy(update={"rpc_tls": False})) is None
    with pytest.raises(HBaseAuthError, match=r"TLS files for HBase's RPC \(rpc_tls\) \(tls_ca_file nowhere.pem"):
        rpc_tls_context(s)
