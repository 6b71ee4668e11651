"""The Kerberos part of the local stack (``stack up --kerberos``), its pure pieces: settings, processes and
ports, the rendered realm and HBase configuration, the command lines, which stack adopts a running part;
and the realm itself, made with MIT's tools in a temporary folder (no KDC is started, no port is taken)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from devstack import LocalStack, krb_authz
from devstack.kerberos import (
    CLIENT_USER,
    GATEWAY_PORT_OFFSETS,
    REALM,
    STRANGER_USER,
    KerberosPart,
    KerberosSettings,
    ensure_gssapi,
    ensure_kdc_tools,
    ensure_realm,
    kdc_argv,
    render_kerberos_configs,
)
from devstack.krb_authz import INGEST_GRANTS, Grant
from devstack.krb_hbase import krb_hbase_values, render_krb_hbase_configs
from devstack.launch import acl_argv, kerberos_argv
from devstack.layout import StackLayout, infra_dir
from devstack.settings import StackSettings
from devstack.topology import plan_topology, topology_from_json
from pipeline.errors import StackError

ON = KerberosSettings(kerberos=True)


def _layout(tmp_path: Path) -> StackLayout:
    return StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())


def _properties(xml: str) -> dict[str, str]:
    return {p.findtext("name") or "": p.findtext("value") or "" for p in ET.fromstring(xml).iter("property")}


# -- settings, processes, ports --------------------------------------------------------------------


def test_kerberos_is_off_by_default_and_adds_two_processes_after_hbase() -> None:
    assert not KerberosSettings().kerberos and not KerberosSettings.of(StackSettings()).kerberos
    assert [p.name for p in plan_topology(StackSettings()).processes] == ["kafka", "hbase"]
    topo = plan_topology(StackSettings(registry=True, cdc=True), ON)
    assert [p.name for p in topo.processes] == ["kafka", "hbase", "kdc", "hbase-krb", "registry", "postgres",
                                                "connect"]
    assert topo.process("kdc").ports == {"kdc": 8890}
    assert topo.process("hbase-krb").ports == {
        "krb zookeeper": 2182, "krb master": 16700, "krb regionserver": 16720, "krb plain thrift1": 9690,
        "krb plain thrift2": 9691, "krb sasl thrift1": 9692, "krb sasl thrift2": 9693, "krb https thrift1": 9694,
        "krb https thrift2": 9695}
    assert [g.name for g in topo.gateways] == ["hbase"]  # the plain HBase's gateways only


def test_the_default_ports_clear_every_other_part_of_the_stack() -> None:
    everything = StackSettings(secure=True, registry=True, cdc=True)
    ports = [port for p in plan_topology(everything, ON).processes for port in p.ports.values()]
    assert len(ports) == len(set(ports))
    assert 9094 not in ports  # Kafka's SASL_SSL listener (kafka_port + 2) is not a process port: checked here
    plan_topology(StackSettings(region_servers=2, gateways=2), ON)  # raises on a clash
    plan_topology(StackSettings(region_servers=3, gateways=3, secure=True, registry=True, cdc=True), ON)


@pytest.mark.parametrize(("setting", "value", "both"), [
    ("kdc_port", 9092, "kafka and kdc"),
    # a gateway range that reaches 9090 clashes on its fifth port
    ("kerberos_thrift_port", 9086, "hbase thrift1 and hbase-krb krb https thrift1"),
    ("kerberos_zookeeper_port", 2181, "hbase zookeeper and hbase-krb krb zookeeper"),
    ("kerberos_master_port", 16000, "hbase hbase master and hbase-krb krb master")])
def test_a_port_clash_with_the_kerberos_part_is_named(setting: str, value: int, both: str) -> None:
    with pytest.raises(StackError, match=f"is assigned to both {both}: .*kerberos_thrift_port"):
        plan_topology(StackSettings(), KerberosSettings(kerberos=True, **{setting: value}))


def test_the_defaults_clear_the_second_stacks_of_the_integration_tests() -> None:
    """The cluster and fault tests run stacks of their own on x90..x93, 2x81 and 16x00/16x20 (x = 1..5), while
    the main stack, with its Kerberos part, runs."""
    ports = {port for p in plan_topology(StackSettings(), ON).processes if p.role in ("kdc", "hbase-krb")
             for port in p.ports.values()}
    taken = {base + 100 * x + d for x in range(1, 6) for base, span in ((9090, 4), (2181, 1), (16000, 1), (16020, 1))
             for d in range(span)}
    assert not ports & taken


def test_the_recorded_topology_keeps_the_kerberos_roles() -> None:
    topo = plan_topology(StackSettings(), ON)
    assert topology_from_json(topo.to_json()) == topo


def test_a_stack_adopts_a_kerberos_part_an_earlier_up_started_with_its_ports(tmp_path: Path) -> None:
    settings = StackSettings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    assert LocalStack(settings).kerberos is None
    (tmp_path / "state" / "kerberos").mkdir(parents=True)
    KerberosSettings(kerberos=True, kdc_port=18890, kerberos_thrift_port=19190).save(
        tmp_path / "state" / "kerberos" / "settings.json")
    (tmp_path / "state" / "kdc.pid").write_text("1 1\n")  # left by `up --kerberos`: kept
    adopted = LocalStack(settings)
    part = adopted.kerberos
    assert part is not None and part.kdc_port == 18890 and part.sasl_thrift1_port == 19192
    assert "hbase-krb" not in adopted.hbase_pids() and "kdc" not in adopted.hbase_pids()
    assert adopted.status().ports["krb https thrift2"] == 19195


def test_the_part_names_what_clients_need(tmp_path: Path) -> None:
    part = KerberosPart.of(ON, _layout(tmp_path))
    folder = tmp_path / "state" / "kerberos"
    assert part.realm == REALM and part.host == "localhost"
    assert part.client_principal == f"{CLIENT_USER}@{REALM}" and part.client_keytab == folder / "ingest.keytab"
    assert part.stranger_principal == f"{STRANGER_USER}@{REALM}" and part.stranger_keytab == folder / "stranger.keytab"
    assert part.service_principal == f"hbase/localhost@{REALM}" and part.http_principal == f"HTTP/localhost@{REALM}"
    assert part.env() == {"KRB5_CONFIG": str(folder / "krb5.conf")}
    assert part.ca_file == tmp_path / "state" / "secure" / "ca.pem"
    assert part.https_url(2) == "https://localhost:9695/"
    assert list(GATEWAY_PORT_OFFSETS.values()) == list(range(6))


# -- rendered configuration and command lines ------------------------------------------------------


def test_krb5_conf_names_the_loopback_kdc_without_dns(tmp_path: Path) -> None:
    part = KerberosPart.of(KerberosSettings(kerberos=True, kdc_port=18890), _layout(tmp_path))
    texts = render_kerberos_configs(part, infra_dir())
    krb5, kdc = texts[part.krb5_conf], texts[part.kdc_conf]
    for line in (f"default_realm = {REALM}", "rdns = false", "udp_preference_limit = 1", "dns_lookup_kdc = false",
                 "kdc = 127.0.0.1:18890", f"localhost = {REALM}"):
        assert line in krb5
    assert "kdc_listen = 127.0.0.1:18890" in kdc and "kdc_tcp_listen = 127.0.0.1:18890" in kdc
    assert f"key_stash_file = {part.folder}/stash" in kdc


def test_the_kerberized_hbase_configuration_parses_and_turns_kerberos_on(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay)
    texts = render_krb_hbase_configs(krb_hbase_values(ON, part, lay, "secret-pw"), infra_dir())
    core, site = _properties(texts["core-site.xml"]), _properties(texts["hbase-site.xml"])
    assert core["hadoop.security.authentication"] == "kerberos"  # Hadoop's login reads it from here only
    assert core["hadoop.proxyuser.hbase.hosts"] == core["hadoop.proxyuser.hbase.groups"] == "*"
    assert site["hbase.security.authentication"] == "kerberos"
    for key in ("hbase.master.kerberos.principal", "hbase.regionserver.kerberos.principal",
                "hbase.thrift.kerberos.principal"):
        assert site[key] == f"hbase/localhost@{REALM}"
    assert site["hbase.thrift.keytab.file"] == str(part.folder / "hbase.keytab")
    assert site["hbase.thrift.spnego.principal"] == f"HTTP/localhost@{REALM}"
    assert site["hbase.thrift.spnego.keytab.file"] == str(part.folder / "HTTP.keytab")
    assert site["zookeeper.sasl.client"] == "false"
    assert site["hbase.zookeeper.property.clientPort"] == "2182" and site["hbase.master.port"] == "16700"
    assert site["hbase.rootdir"] == f"file://{lay.krb_hbase}/root"
    assert site["hbase.regionserver.thrift.ipaddress"] == "127.0.0.1"
    assert site["hbase.thrift.ssl.keystore.type"] == "PKCS12"
    assert "hbase.thrift.security.qop" not in site  # set per gateway by the launcher
    # authorization: the AccessController everywhere, the service user (the servers, the plain gateways) super
    assert site["hbase.security.authorization"] == "true" and site["hbase.superuser"] == "hbase"
    controller = "org.apache.hadoop.hbase.security.access.AccessController"
    for kind in ("master", "region", "regionserver"):
        assert site[f"hbase.coprocessor.{kind}.classes"] == controller


def test_argv_runs_the_launcher_in_kerberos_mode_with_the_realm(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay)
    proc = plan_topology(StackSettings(), ON).process("hbase-krb")
    argv = kerberos_argv(proc, ON, part, lay, tmp_path / "launcher")
    assert f"-Djava.security.krb5.conf={part.krb5_conf}" in argv and "-Dzookeeper.sasl.client=false" in argv
    assert "-Xmx1024m" in argv and argv[argv.index("-cp") + 1].startswith(f"{lay.krb_hbase_conf}:")
    assert argv[-8:] == ["HBaseStack", "kerberos", "9690", "9691", "9692", "9693", "9694", "9695"]
    if shutil.which("krb5kdc", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])):
        kdc = kdc_argv(part)
        assert kdc[0] == "env" and f"KRB5_KDC_PROFILE={part.kdc_conf}" in kdc and kdc[-3:] == ["-n", "-r", REALM]


def test_a_grant_runs_the_launcher_in_acl_mode_with_the_kerberized_configuration(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay)
    argv = acl_argv(lay, part, "revoke", "ingest", "W", "orders", tmp_path / "launcher")
    assert f"-Djava.security.krb5.conf={part.krb5_conf}" in argv
    assert argv[argv.index("-cp") + 1].startswith(f"{lay.krb_hbase_conf}:{tmp_path / 'launcher'}:")
    assert argv[-6:] == ["HBaseStack", "acl", "revoke", "ingest", "W", "orders"]
    on_cluster = acl_argv(lay, part, "grant", "ingest", "C", "@default", tmp_path / "launcher", cluster=True)
    assert on_cluster[on_cluster.index("-cp") + 1].startswith(f"{lay.conf / 'hbase'}:")
    assert f"-Djava.security.auth.login.config={part.folder / 'cluster-jaas.conf'}" in on_cluster
    assert [str(g) for g in INGEST_GRANTS] == ["ingest C @default"]  # CREATE in default: owner of its tables
    with pytest.raises(ValueError, match="RWXCA"):
        Grant("ingest", "RWQ", "orders")


def test_the_stacks_grants_are_made_once_per_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay)
    lay.krb_hbase.mkdir(parents=True)
    made: list[tuple[str, str]] = []
    monkeypatch.setattr(krb_authz, "acl", lambda _lay, _part, op, grant, cluster=False:
                        made.append((op, f"{grant}{' (cluster)' if cluster else ''}")))
    assert krb_authz.ensure_grants(lay, part) and made == [("grant", "ingest C @default")]
    assert not krb_authz.ensure_grants(lay, part) and len(made) == 1  # the marker says they are there
    (lay.krb_hbase / "grants.done").unlink()  # a new data folder (hbase:acl is in it): granted again
    assert krb_authz.ensure_grants(lay, part) and len(made) == 2
    (lay.state / "hbase").mkdir(parents=True)  # a Kerberized cluster's data folder has a marker of its own
    assert krb_authz.ensure_grants(lay, part, cluster=True) and made[-1] == ("grant", "ingest C @default (cluster)")
    assert (lay.state / "hbase" / "grants.done").is_file()


def test_missing_tools_name_the_debian_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    with pytest.raises(StackError, match="apt-get install krb5-kdc krb5-admin-server krb5-user"):
        ensure_kdc_tools()


def test_a_missing_gssapi_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gssapi" else real(name, *a))
    with pytest.raises(StackError, match=r"gssapi is not installed.*'hbase-ingest\[kerberos\]'.*libkrb5-dev"):
        ensure_gssapi()


def test_cli_up_offers_kerberos() -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "up", "--help"], capture_output=True, text=True,
                         check=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert "--kerberos" in out.stdout


# -- the realm (MIT's kdb5_util and kadmin.local; no KDC started) ----------------------------------


def test_the_realm_is_made_once_with_private_keytabs(tmp_path: Path) -> None:
    part = KerberosPart.of(KerberosSettings(kerberos=True, kdc_port=18890), _layout(tmp_path))
    assert ensure_realm(part, infra_dir())
    assert stat.S_IMODE(part.folder.stat().st_mode) == 0o700
    keytabs = sorted(p.name for p in part.folder.glob("*.keytab"))
    assert keytabs == ["HTTP.keytab", "hbase.keytab", "ingest.keytab", "kafka.keytab", "stranger.keytab"]
    assert all(stat.S_IMODE((part.folder / k).stat().st_mode) == 0o600 for k in keytabs)
    listed = subprocess.run(["klist", "-k", str(part.client_keytab)], capture_output=True, text=True, check=True)
    assert f"{CLIENT_USER}@{REALM}" in listed.stdout
    stash = (part.folder / "stash").read_bytes()
    assert not ensure_realm(part, infra_dir())  # reused: the database and keys stay as they are
    assert (part.folder / "stash").read_bytes() == stash
