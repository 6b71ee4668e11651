"""The CDC part of the local stack (``stack up --cdc``), its pure pieces: settings, processes and ports,
PostgreSQL's and Kafka Connect's command lines and configuration, the slot-and-offsets rule, the
connector's status verdict; and which stack adopts running CDC processes."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devstack import LocalStack
from devstack.cdc import probe_matches
from devstack.connect import (
    CONNECTOR_NAME,
    connect_argv,
    connector_problem,
    connector_properties,
    render_properties,
    worker_properties,
)
from devstack.layout import StackLayout, infra_dir
from devstack.pgserver import (
    DEBIAN_BIN_DIR,
    PROBE_TABLE,
    RunAs,
    SlotRecord,
    captured_tables,
    initdb_argv,
    postgres_argv,
    psql_argv,
    publication_sql,
    searchable_by,
    setup_sql,
    slot_action,
    tables_sql,
)
from devstack.processes import OwnedProcess
from devstack.settings import StackSettings, load_stack_settings
from devstack.topology import plan_topology, topology_from_json
from pipeline.errors import ConfigError, StackError

CDC = StackSettings(cdc=True)


def _layout(tmp_path: Path) -> StackLayout:
    return StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())


# -- settings and topology -------------------------------------------------------------------------


def test_cdc_is_off_by_default_and_set_by_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = StackSettings()
    assert not s.cdc and s.postgres_port == 5433 and s.connect_port == 8083 and s.cdc_tables == ["public.orders"]
    assert [p.name for p in plan_topology(s).processes] == ["kafka", "hbase"]
    path = tmp_path / "p.toml"
    path.write_text('[stack]\ncdc = true\ncdc_tables = ["public.orders", "sales.refunds"]\n')
    assert load_stack_settings(path).cdc_tables == ["public.orders", "sales.refunds"]
    monkeypatch.setenv("HBASE_INGEST_STACK__CDC", "true")
    assert load_stack_settings(None).cdc


@pytest.mark.parametrize("tables", ['["orders"]', '["public.Orders"]', '["public.o; drop"]', "[]"])
def test_captured_tables_must_be_plain_schema_dot_table(tmp_path: Path, tables: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(f"[stack]\ncdc_tables = {tables}\n")
    with pytest.raises(ConfigError, match="cdc_tables"):
        load_stack_settings(path)


def test_cdc_processes_come_after_hbase_so_down_stops_them_first() -> None:
    topo = plan_topology(CDC)
    assert [p.name for p in topo.processes] == ["kafka", "hbase", "postgres", "connect"]
    assert topo.process("postgres").ports == {"postgres": 5433}
    assert topo.process("connect").ports == {"connect": 8083}
    assert topology_from_json(topo.to_json()) == topo
    cluster = plan_topology(StackSettings(cdc=True, region_servers=1, gateways=1))
    assert [p.name for p in cluster.processes][-2:] == ["postgres", "connect"]


def test_a_cdc_port_clash_is_named() -> None:
    with pytest.raises(StackError, match=r"port 9090 is assigned to both hbase thrift1 and connect"):
        plan_topology(StackSettings(cdc=True, connect_port=9090))


def test_a_stack_adopts_cdc_processes_an_earlier_up_started(tmp_path: Path) -> None:
    state = tmp_path / "state"
    plain = LocalStack(StackSettings(state_dir=state, cache_dir=tmp_path / "cache"))
    assert plain.cdc is None and "postgres" not in plain.procs
    state.mkdir()
    (state / "connect.pid").write_text("1 1\n")  # left by `up --cdc`: this stack keeps the CDC part
    adopted = LocalStack(StackSettings(state_dir=state, cache_dir=tmp_path / "cache"))
    assert adopted.settings.cdc and adopted.cdc is not None
    assert adopted.procs["postgres"].stop_signal == signal.SIGINT and adopted.procs["postgres"].forks
    assert "postgres" not in adopted.hbase_pids() and "connect" not in adopted.hbase_pids()


# -- PostgreSQL ------------------------------------------------------------------------------------


def test_postgres_runs_on_loopback_with_logical_wal(tmp_path: Path) -> None:
    argv = postgres_argv(CDC, tmp_path / "data", tmp_path / "run")
    assert argv[:3] == [str(DEBIAN_BIN_DIR / "postgres"), "-D", str(tmp_path / "data")]
    for option in ("-clisten_addresses=127.0.0.1", "-cport=5433", f"-cunix_socket_directories={tmp_path / 'run'}",
                   "-cwal_level=logical"):
        assert option in argv
    init = initdb_argv(CDC, tmp_path / "data")
    assert "--auth-local=trust" in init and "--auth-host=scram-sha-256" in init and "-U" in init
    psql = psql_argv(StackSettings(postgres_port=6543, postgres_bin_dir=tmp_path), tmp_path / "run", "shop")
    assert psql[0] == str(tmp_path / "psql") and psql[psql.index("-h") + 1] == str(tmp_path / "run")
    assert psql[psql.index("-p") + 1] == "6543" and "ON_ERROR_STOP=1" in psql


def test_run_as_wraps_in_setpriv_only_for_another_user() -> None:
    assert RunAs().wrap(["initdb", "-D", "d"]) == ["initdb", "-D", "d"]
    wrapped = RunAs("postgres", 101, 104).wrap(["postgres", "-D", "d"])
    assert wrapped == ["setpriv", "--reuid=101", "--regid=104", "--init-groups", "--", "postgres", "-D", "d"]
    caps = RunAs("postgres", 101, 104, traverse=True).wrap(["postgres"])
    assert "--ambient-caps=+dac_read_search" in caps and caps[-2:] == ["--", "postgres"]


def test_searchable_by_reads_the_mode_bits_of_every_parent() -> None:
    modes = {"/": (0o755, 0, 0), "/root": (0o700, 0, 0), "/root/state": (0o755, 0, 0),
             "/srv": (0o750, 0, 50), "/srv/state": (0o755, 0, 0)}

    def look(p: Path) -> tuple[int, int, int]:
        mode, uid, gid = modes[str(p)]
        return stat.S_IFDIR | mode, uid, gid

    assert not searchable_by(Path("/root/state"), 101, [104], look)  # root's home is 0700
    assert searchable_by(Path("/root/state"), 0, [0], look)
    assert searchable_by(Path("/srv/state"), 101, [104, 50], look)  # through the group bit
    assert not searchable_by(Path("/srv/state"), 101, [104], look)


def test_setup_sql_takes_only_a_generated_password() -> None:
    sql = setup_sql("A" * 20 + "_-9")
    assert "LOGIN REPLICATION" in sql and "CREATE DATABASE shop OWNER cdc" in sql and "\\gexec" in sql
    with pytest.raises(ValueError, match="password"):
        setup_sql("x'; DROP ROLE cdc; --aaaaaaaaaaaa")


def test_example_tables_have_full_replica_identity_and_the_publication_lists_the_captured_ones() -> None:
    tables = tables_sql()
    assert "public.orders (order_id bigint PRIMARY KEY" in tables and "updated_at timestamptz" in tables
    assert "ALTER TABLE public.orders REPLICA IDENTITY FULL" in tables
    assert captured_tables(StackSettings(cdc_tables=["public.orders", PROBE_TABLE, "s.t"])) == [
        "public.orders", PROBE_TABLE, "s.t"]
    pub = publication_sql(captured_tables(CDC))
    assert f"FOR TABLE public.orders, {PROBE_TABLE}" in pub and f"SET TABLE public.orders, {PROBE_TABLE}" in pub
    assert "GRANT SELECT ON public.orders TO cdc" in pub


def test_slot_and_offsets_are_kept_only_together() -> None:
    wanted = SlotRecord.wanted(CDC)
    assert slot_action("ok", wanted, wanted) == "keep"
    assert slot_action("missing", wanted, wanted) == "reset"  # offsets of a slot that is gone: never reused
    assert slot_action("lost", wanted, wanted) == "reset"
    assert slot_action("ok", None, wanted) == "reset"
    other_tables = SlotRecord.wanted(StackSettings(cdc_tables=["public.orders", "s.t"]))
    assert slot_action("ok", other_tables, wanted) == "reset"
    assert slot_action("ok", SlotRecord.wanted(StackSettings(cdc_topic_prefix="x")), wanted) == "reset"


# -- Kafka Connect ---------------------------------------------------------------------------------


def test_worker_uses_schemaless_json_loopback_rest_and_state_offsets(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    props = worker_properties(StackSettings(cdc=True, kafka_port=9192, connect_port=8183), lay)
    assert props["bootstrap.servers"] == "127.0.0.1:9192" and props["listeners"] == "http://127.0.0.1:8183"
    assert props["key.converter.schemas.enable"] == props["value.converter.schemas.enable"] == "false"
    assert props["offset.storage.file.filename"] == str(lay.state / "connect" / "offsets.dat")
    assert props["offset.flush.interval.ms"] == "1000" and props["plugin.path"] == str(lay.connect_plugins)


def test_connector_captures_the_configured_tables_through_the_stacks_slot(tmp_path: Path) -> None:
    password = tmp_path / "pw.properties"
    props = connector_properties(StackSettings(cdc=True, cdc_topic_prefix="inventory"), password)
    assert props["name"] == CONNECTOR_NAME and props["plugin.name"] == "pgoutput"
    assert props["table.include.list"] == "public\\.orders,public\\.hbase_ingest_probe"
    assert props["publication.autocreate.mode"] == "disabled" and props["topic.prefix"] == "inventory"
    assert props["database.password"] == f"${{file:{password}:password}}"
    assert "tombstones.on.delete" not in props  # Debezium's default: true
    with pytest.raises(ValueError, match="':'"):
        connector_properties(CDC, Path("/odd:dir/pw.properties"))


def test_properties_are_escaped_as_java_reads_them(tmp_path: Path) -> None:
    text = render_properties({"table.include.list": "public\\.orders", "a key": "x=y", "lead": " space"}, "made")
    assert text.splitlines() == ["# made", "table.include.list=public\\\\.orders", "a\\ key=x=y", "lead=\\ space"]


def test_connect_runs_standalone_from_the_cached_classpath(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    argv = connect_argv(StackSettings(connect_heap_mb=400), lay, tmp_path / "w.properties", tmp_path / "c.properties")
    assert "-Xmx400m" in argv and argv[argv.index("-cp") + 1] == f"{lay.connect_lib}/*"
    assert argv[-3:] == ["org.apache.kafka.connect.cli.ConnectStandalone", str(tmp_path / "w.properties"),
                         str(tmp_path / "c.properties")]


def test_connector_status_verdict() -> None:
    running = {"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
    assert connector_problem(json.dumps(running)) is None
    failed = {"connector": {"state": "RUNNING"},
              "tasks": [{"id": 0, "state": "FAILED", "trace": "org.x.ConnectException: slot in use\n\tat a.b"}]}
    assert connector_problem(failed) == f"task 0 of {CONNECTOR_NAME} is FAILED: org.x.ConnectException: slot in use"
    assert "no task" in (connector_problem({"connector": {"state": "RUNNING"}, "tasks": []}) or "")
    assert "UNASSIGNED" in (connector_problem({"connector": {"state": "UNASSIGNED"}, "tasks": []}) or "")


def test_probe_event_is_recognised_by_its_token() -> None:
    event = json.dumps({"before": None, "after": {"id": 1, "token": "abc"}, "op": "u"}).encode()
    assert probe_matches(event, "abc") and not probe_matches(event, "abd")
    assert not probe_matches(None, "abc") and not probe_matches(b"not json", "abc") and not probe_matches(b"[]", "a")


# -- processes -------------------------------------------------------------------------------------


def test_stop_sends_the_servers_own_signal(tmp_path: Path) -> None:
    # ignores SIGTERM: only the configured SIGINT ends it before the SIGKILL grace period (its SIGINT
    # handler set here: a process started in the background by a shell inherits SIGINT ignored)
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "signal.signal(signal.SIGINT, signal.default_int_handler); print('up', flush=True); time.sleep(60)")
    proc = OwnedProcess("pg", tmp_path / "p.pid", tmp_path / "p.log", stop_signal=signal.SIGINT, forks=True)
    proc.start([sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "p.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (proc.rss_mb() or 0) > 1  # the family's Pss
    t0 = time.monotonic()
    assert proc.stop(timeout_s=20)
    assert time.monotonic() - t0 < 10 and proc.pid() is None


def test_cli_up_offers_cdc() -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "up", "--help"], capture_output=True, text=True,
                         check=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert "--cdc" in out.stdout
