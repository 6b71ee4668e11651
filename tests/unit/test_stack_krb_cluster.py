"""A Kerberized cluster (``stack up --region-servers N --gateways M --kerberos``), its pure pieces: which
processes run in which order on which ports, the command lines, the rendered ``hbase-site.xml``, the part a
client reads, a Kerberized HDFS under it, and the refusal of a running cluster of the other kind."""

from __future__ import annotations

import ssl
import xml.etree.ElementTree as ET
from pathlib import Path
from string import Template

import pytest

from devstack import LocalStack
from devstack.kerberos import REALM, KerberosPart, KerberosSettings, cluster_qop, render_template
from devstack.krb_client import gateway_ports, gateway_security, hbase_keys
from devstack.krb_cluster import kerberized_rendered
from devstack.krb_hbase import krb_hbase_values
from devstack.launch import namenode_format_argv, server_argv
from devstack.layout import StackLayout, infra_dir
from devstack.settings import StackSettings
from devstack.topology import plan_topology, topology_from_json
from devstack.webhdfs import WebHdfs
from pipeline.errors import StackError

ON = KerberosSettings(kerberos=True)
CLUSTER = StackSettings(region_servers=2, gateways=2)


def _layout(tmp_path: Path) -> StackLayout:
    return StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())


def test_the_kdc_starts_before_zookeeper_and_there_is_no_second_hbase() -> None:
    topo = plan_topology(CLUSTER, ON)
    assert [p.name for p in topo.processes] == ["kafka", "kdc", "zookeeper", "master", "regionserver-1",
                                                "regionserver-2", "gateway-1", "gateway-2"]
    assert topology_from_json(topo.to_json()) == topo


def test_each_gateway_serves_sasl_and_https_beside_its_plain_ports() -> None:
    topo = plan_topology(CLUSTER, ON)
    assert topo.process("gateway-1").ports == {"thrift1": 9090, "thrift2": 9091, "krb sasl thrift1": 9692,
                                               "krb sasl thrift2": 9693, "krb https thrift1": 9694,
                                               "krb https thrift2": 9695}
    assert topo.process("gateway-2").ports == {"thrift1": 9100, "thrift2": 9101, "krb sasl thrift1": 9702,
                                               "krb sasl thrift2": 9703, "krb https thrift1": 9704,
                                               "krb https thrift2": 9705}
    # without Kerberos the cluster's gateways are what they were
    assert plan_topology(CLUSTER).process("gateway-2").ports == {"thrift1": 9100, "thrift2": 9101}


def test_a_kerberized_cluster_runs_on_hdfs_whose_servers_get_the_realm(tmp_path: Path) -> None:
    s = StackSettings(region_servers=2, gateways=2, hdfs=True, datanodes=2)
    topo = plan_topology(s, ON)
    assert [p.name for p in topo.processes][:6] == ["kafka", "kdc", "zookeeper", "namenode", "datanode-1",
                                                     "datanode-2"]
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay, ((9090, 9091, 0), (9100, 9101, 10)))
    realm = f"-Djava.security.krb5.conf={part.krb5_conf}"
    for name in ("namenode", "datanode-2"):
        assert server_argv(topo.process(name), s, lay, tmp_path / "launcher", part)[1] == realm
        assert realm not in server_argv(plan_topology(s).process(name), s, lay, tmp_path / "launcher")
    assert namenode_format_argv(lay, part)[1] == realm and realm not in namenode_format_argv(lay)


def test_a_kerberized_hdfs_configuration_parses_and_turns_kerberos_on(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay, ((9090, 9091, 0),))
    values = {**krb_hbase_values(ON, part, lay, "pw-1"), "NAMENODE_HTTP_PORT": "9881"}
    props: dict[str, str] = {}
    for name in ("hdfs-core-security.xml", "hdfs-security.xml"):
        root = ET.fromstring(f"<configuration>{render_template(infra_dir(), name, values)}</configuration>")
        props |= {p.findtext("name") or "": p.findtext("value") or "" for p in root.iter("property")}
    assert props["hadoop.security.authentication"] == "kerberos"
    assert props["hadoop.http.authentication.type"] == "kerberos"
    assert props["dfs.block.access.token.enable"] == "true" and props["dfs.http.policy"] == "HTTPS_ONLY"
    assert props["dfs.data.transfer.protection"] == "authentication"
    service = part.service_principal
    assert props["dfs.namenode.kerberos.principal"] == props["dfs.datanode.kerberos.principal"] == service
    assert props["dfs.web.authentication.kerberos.principal"] == part.http_principal
    assert props["dfs.namenode.https-address"] == "127.0.0.1:9881"
    for name, key in (("ssl-server.xml", "ssl.server.keystore.password"),
                      ("ssl-client.xml", "ssl.client.truststore.password")):
        root = ET.fromstring(render_template(infra_dir(), name, values))
        assert {p.findtext("name"): p.findtext("value") for p in root.iter("property")}[key] == "pw-1"


def test_webhdfs_of_a_kerberized_hdfs_is_https_with_spnego_and_no_user_name() -> None:
    web = WebHdfs("127.0.0.1", 9881, tls=ssl.create_default_context(), negotiate=lambda: "Negotiate x")
    assert web.base == "https://127.0.0.1:9881/webhdfs/v1"
    assert web._url("/a b", "OPEN", noredirect="true") == ("https://127.0.0.1:9881/webhdfs/v1/a%20b?op=OPEN"
                                                           "&noredirect=true")
    assert "user.name=" in WebHdfs("127.0.0.1", 9881)._url("/a", "OPEN")


def test_a_gateway_port_clash_names_both_listeners() -> None:
    # gateway 1's HTTPS Thrift1 (kerberos_thrift_port + 4) lands on its own plain Thrift1
    with pytest.raises(StackError, match="9090 is assigned to both gateway-1 thrift1 and gateway-1 krb https thrift1"):
        plan_topology(CLUSTER, KerberosSettings(kerberos=True, kerberos_thrift_port=9086))


def test_the_servers_get_the_realm_zookeeper_s_sasl_and_the_gateways_six_ports(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay, ((9090, 9091, 0), (9100, 9101, 10)))
    topo = plan_topology(CLUSTER, ON)
    jaas = f"-Djava.security.auth.login.config={part.folder / 'cluster-jaas.conf'}"
    for name in ("master", "regionserver-2", "gateway-2"):
        argv = server_argv(topo.process(name), CLUSTER, lay, tmp_path / "launcher", part)
        assert argv[1:4] == [f"-Djava.security.krb5.conf={part.krb5_conf}", jaas,
                             "-Dzookeeper.sasl.client.username=hbase"]
    gateway = server_argv(topo.process("gateway-2"), CLUSTER, lay, tmp_path / "launcher", part)
    assert gateway[-9:] == ["HBaseStack", "kerberos-gateway", "auth-int", "9100", "9101", "9702", "9703", "9704",
                            "9705"]
    first = server_argv(topo.process("gateway-1"), CLUSTER, lay, tmp_path / "launcher", part)
    assert first[-7] == "auth-conf"
    plain = server_argv(plan_topology(CLUSTER).process("gateway-2"), CLUSTER, lay, tmp_path / "launcher")
    assert plain[-4:] == ["HBaseStack", "gateway", "9100", "9101"]
    assert not [a for a in plain if a.startswith(("-Djava.security", "-Dzookeeper"))]
    zookeeper = server_argv(topo.process("zookeeper"), CLUSTER, lay, tmp_path / "launcher", part)
    assert jaas in zookeeper and f"-Djava.security.krb5.conf={part.krb5_conf}" in zookeeper
    assert "-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider" in zookeeper
    assert "-Dzookeeper.kerberos.removeHostFromPrincipal=true" in zookeeper
    plain_zk = server_argv(plan_topology(CLUSTER).process("zookeeper"), CLUSTER, lay, tmp_path / "launcher")
    assert not [a for a in plain_zk if a.startswith(("-Djava.security", "-Dzookeeper"))]


def test_the_jaas_file_names_the_service_keytab_in_both_sections(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay, ((9090, 9091, 0),))
    text = render_template(infra_dir(), "cluster-jaas.conf", krb_hbase_values(ON, part, lay, "pw-1"))
    for section in ("Server", "Client"):
        body = text.split(f"{section} {{", 1)[1].split("};", 1)[0]
        assert f'keyTab="{part.keytab("hbase/localhost")}"' in body and f'principal="{part.service_principal}";' in body
        assert "useKeyTab=true" in body and "useTicketCache=false" in body


def test_hbase_site_of_a_kerberized_cluster_parses_and_turns_kerberos_on(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    part = KerberosPart.of(ON, lay, ((9090, 9091, 0), (9100, 9101, 10)))
    security = render_template(infra_dir(), "cluster-security.xml", krb_hbase_values(ON, part, lay, "pw-1"))
    values = {"STATE": "/s", "ZK_HOST": "127.0.0.1", "DISTRIBUTED": "true", "ROOTDIR": "file:///s/hbase/root",
              "ZK_PORT": "2181",
              "SESSION_TIMEOUT_MS": "20000", "STREAM_CAPABILITY_ENFORCE": "false", "WAL_PROVIDER": "filesystem",
              "MASTER_PORT": "16000", "REGIONSERVER_PORT": "16020", "CLIENT_RETRIES": "5",
              "CLIENT_OPERATION_TIMEOUT_MS": "30000"}
    template = (infra_dir() / "conf" / "hbase" / "hbase-site.xml.in").read_text()
    site = {p.findtext("name"): p.findtext("value")
            for p in ET.fromstring(Template(template).substitute(values, SECURITY=security)).iter("property")}
    assert site["hbase.security.authentication"] == site["hadoop.security.authentication"] == "kerberos"
    for key in ("hbase.master.kerberos.principal", "hbase.regionserver.kerberos.principal",
                "hbase.thrift.kerberos.principal"):
        assert site[key] == f"hbase/localhost@{REALM}"
    assert site["hbase.regionserver.keytab.file"] == str(part.folder / "hbase.keytab")
    assert site["hbase.thrift.ssl.keystore.password"] == "pw-1" and site["zookeeper.sasl.client"] == "true"
    assert site["hbase.security.authorization"] == "true" and site["hbase.superuser"] == "hbase"
    assert str(site["hbase.coprocessor.region.classes"]).endswith(".AccessController")
    assert site["hbase.cluster.distributed"] == "true" and "hbase.thrift.security.qop" not in site
    plain = ET.fromstring(Template(template).substitute(values, SECURITY=""))
    assert "hbase.security.authentication" not in {p.findtext("name") for p in plain.iter("property")}


def test_the_part_lists_every_gateway_for_clients(tmp_path: Path) -> None:
    part = KerberosPart.of(ON, _layout(tmp_path), ((9090, 9091, 0), (9100, 9101, 10)))
    assert part.shifts == (0, 10)
    assert gateway_ports(part, "plain", 1) == (9100, 9101) and gateway_ports(part, "sasl", 1) == (9702, 9703)
    assert gateway_ports(part, "https", 0) == (9694, 9695)
    keys = hbase_keys(part, "sasl")
    assert keys["gateways"] == [{"host": "localhost", "port": 9692, "thrift2_port": 9693, "sasl_qop": "auth-conf"},
                                {"host": "localhost", "port": 9702, "thrift2_port": 9703, "sasl_qop": "auth-int"}]
    assert gateway_security(part, "sasl", gateway=1).qop == "auth-int"
    assert [cluster_qop(j) for j in range(4)] == ["auth-conf", "auth-int", "auth", "auth-conf"]
    assert "sasl_qop" not in hbase_keys(part, "https")["gateways"][1]
    assert keys["auth"] == "kerberos" and keys["sasl_qop"] == "auth-conf"
    standalone = KerberosPart.of(ON, _layout(tmp_path))
    assert standalone.shifts == (0,) and len(hbase_keys(standalone, "https")["gateways"]) == 1
    assert standalone.qops == ("auth-conf",)


def test_the_stack_describes_its_kerberized_cluster(tmp_path: Path) -> None:
    settings = CLUSTER.model_copy(update={"state_dir": tmp_path / "state", "cache_dir": tmp_path / "cache",
                                          "kerberos": True})
    stack = LocalStack(settings)
    assert stack.kerberized_cluster and stack.kerberos is not None
    assert stack.kerberos.plain_thrift1_port == 9090 and stack.kerberos.shifts == (0, 10)
    assert "kdc" not in stack.hbase_pids() and "gateway-2" in stack.hbase_pids()
    assert stack.status().ports["gateway-2 krb https thrift2"] == 9705
    standalone = LocalStack(StackSettings(state_dir=tmp_path / "s2", cache_dir=tmp_path / "cache", kerberos=True))
    assert not standalone.kerberized_cluster and standalone.kerberos is not None


def test_a_running_cluster_of_the_other_kind_is_refused(tmp_path: Path) -> None:
    settings = CLUSTER.model_copy(update={"state_dir": tmp_path / "state", "cache_dir": tmp_path / "cache"})
    conf = tmp_path / "state" / "conf" / "hbase"
    conf.mkdir(parents=True)
    (conf / "hbase-site.xml").write_text("<configuration></configuration>")  # started without Kerberos
    assert not kerberized_rendered(conf)
    (tmp_path / "state" / "master.pid").write_text(f"{__import__('os').getpid()} 0\n")
    stack = LocalStack(settings.model_copy(update={"kerberos": True}))
    stack.procs["master"].pid = lambda: 1  # type: ignore[method-assign]
    with pytest.raises(StackError, match="runs master without Kerberos, and this `up` asks for a cluster with it: "
                                         "run `hbase-ingest stack down` first"):
        stack.hbase_part.provision()
    LocalStack(settings).hbase_part.provision()  # the same kind: nothing to refuse
