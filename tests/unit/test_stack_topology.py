"""The local stack's shapes: port assignment, rendered configs, JVM command lines, the recorded topology."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from devstack import LocalStack
from devstack.launch import server_argv
from devstack.layout import StackLayout, infra_dir
from devstack.settings import StackProfile, StackSettings
from devstack.topology import GATEWAY_PORT_STEP, plan_topology, topology_from_json
from pipeline.errors import ConfigError, StackError

CLUSTER = {"zookeeper_port": 2281, "master_port": 16100, "regionserver_port": 16120, "thrift_port": 9190,
           "thrift2_port": 9191, "kafka_port": 9192, "kafka_controller_port": 9193}


def offset(**values: object) -> StackSettings:
    """Settings on the offset ports of CLUSTER, plus ``values``."""
    return StackSettings.model_validate({**CLUSTER, **values})


def test_default_is_the_one_jvm_stack_on_the_usual_ports() -> None:
    topo = plan_topology(StackSettings())
    assert topo.mode == "standalone"
    assert [p.name for p in topo.processes] == ["kafka", "hbase"]
    assert [(g.thrift_port, g.thrift2_port) for g in topo.gateways] == [(9090, 9091)]
    assert topo.process("hbase").ports == {"zookeeper": 2181, "hbase master": 16000, "hbase regionserver": 16020,
                                           "thrift1": 9090, "thrift2": 9091}


def test_cluster_ports_are_offsets_of_the_base_ports() -> None:
    topo = plan_topology(offset(region_servers=3, gateways=2))
    assert topo.mode == "cluster"
    assert [p.name for p in topo.processes] == [
        "kafka", "zookeeper", "master", "regionserver-1", "regionserver-2", "regionserver-3", "gateway-1",
        "gateway-2"]
    assert topo.region_server_ports == [16120, 16121, 16122]
    assert [(g.name, g.thrift_port, g.thrift2_port) for g in topo.gateways] == [
        ("gateway-1", 9190, 9191), ("gateway-2", 9190 + GATEWAY_PORT_STEP, 9191 + GATEWAY_PORT_STEP)]
    every = [port for p in topo.processes for port in p.ports.values()]
    assert len(every) == len(set(every))


def test_default_ports_with_gateways_stay_clear_of_kafka() -> None:
    topo = plan_topology(StackSettings(region_servers=2, gateways=3))
    ports = {port for g in topo.gateways for port in (g.thrift_port, g.thrift2_port)}
    assert ports == {9090, 9091, 9100, 9101, 9110, 9111} and not ports & {9092, 9093}


def test_overlapping_ports_are_refused_naming_both_listeners() -> None:
    # region server 2 would take 16021, the port given to the master
    with pytest.raises(StackError, match=r"port 16021 is assigned to both master and regionserver-2"):
        plan_topology(StackSettings(region_servers=2, gateways=1, master_port=16021))
    with pytest.raises(StackError, match=r"port 65536 of gateway-2 thrift2 is past 65535"):
        plan_topology(StackSettings(region_servers=1, gateways=2, thrift_port=65524, thrift2_port=65526,
                                    kafka_port=1, kafka_controller_port=2))


@pytest.mark.parametrize(("region_servers", "gateways"), [(2, 0), (0, 1)])
def test_a_cluster_needs_both_region_servers_and_gateways(region_servers: int, gateways: int) -> None:
    with pytest.raises(ValueError, match="a local cluster needs at least one of each"):
        StackSettings(region_servers=region_servers, gateways=gateways)


def test_cli_options_are_validated_like_the_settings(tmp_path: Path) -> None:
    from pipeline.cli.stack import _settings

    config = tmp_path / "c.toml"
    config.write_text(f'[stack]\nstate_dir = "{tmp_path}"\nregion_servers = 2\ngateways = 2\n')
    assert _settings(config, None, None).region_servers == 2
    assert (_settings(config, 3, None).region_servers, _settings(config, 3, None).gateways) == (3, 2)
    with pytest.raises(ConfigError, match=r"--region-servers/--gateways: .*needs at least one of each"):
        _settings(config, None, 0)


def test_topology_json_round_trips_and_bad_json_is_named() -> None:
    topo = plan_topology(offset(region_servers=2, gateways=2))
    back = topology_from_json(topo.to_json())
    assert back == topo
    data = json.loads(topo.to_json())
    assert data["gateways"][1] == {"name": "gateway-2", "host": "127.0.0.1", "thrift_port": 9200,
                                   "thrift2_port": 9201}
    with pytest.raises(StackError, match=r"topology.json is malformed .*run `stack up` again"):
        topology_from_json('{"mode": "cluster", "processes": []}')


def test_status_and_down_follow_the_recorded_shape(tmp_path: Path) -> None:
    cluster = LocalStack(offset(state_dir=tmp_path, region_servers=2, gateways=1))
    (tmp_path / "topology.json").write_text(cluster.topology().to_json())
    recorded = LocalStack.recorded(StackSettings(state_dir=tmp_path))
    assert recorded.topology() == cluster.topology()
    st = recorded.status()
    assert [(p.name, p.state) for p in st.processes][-2:] == [("regionserver-2", "stopped"), ("gateway-1", "stopped")]
    assert not st.running and st.died == []


def _site(layout: StackLayout) -> dict[str, str]:
    root = ET.parse(layout.conf / "hbase" / "hbase-site.xml").getroot()
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.iter("property")}


@pytest.mark.parametrize("shape", [{}, {"region_servers": 2, "gateways": 2}])
def test_rendered_configs_carry_the_memory_and_gateway_limits(tmp_path: Path, shape: dict[str, int]) -> None:
    stack = LocalStack(offset(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", session_timeout_ms=6000,
                              **shape))
    stack._render()
    site = _site(stack.layout)
    assert site["hbase.cluster.distributed"] == ("true" if shape else "false")
    assert site["hbase.rootdir"] == f"file://{tmp_path}/state/hbase/root"
    assert site["hbase.zookeeper.property.clientPort"] == "2281"
    assert site["zookeeper.session.timeout"] == "6000"
    assert site["hbase.wal.provider"] == "filesystem" and site["hbase.unsafe.stream.capability.enforce"] == "false"
    # memstores + block cache under HBase's cap of 0.8 of the heap, with room for the rest of the JVM
    assert float(site["hbase.regionserver.global.memstore.size"]) + float(site["hfile.block.cache.size"]) <= 0.6
    assert float(site["hbase.regionserver.global.memstore.size.lower.limit"]) < 0.95
    assert site["hbase.hregion.memstore.mslab.enabled"] == "false"
    assert int(site["hbase.ipc.server.max.callqueue.size"]) <= 128 * 1024 * 1024
    assert int(site["hbase.thrift.maxWorkerThreads"]) < 1000 and int(site["hbase.thrift.maxQueuedRequests"]) < 1000
    zoo = dict(line.split("=", 1) for line in (stack.layout.conf / "zoo.cfg").read_text().splitlines()
               if line and not line.startswith("#"))
    assert zoo["clientPort"] == "2281" and zoo["dataDir"] == f"{tmp_path}/state/zookeeper"
    assert int(zoo["minSessionTimeout"]) <= 6000 <= int(zoo["maxSessionTimeout"])
    assert "dump" in zoo["4lw.commands.whitelist"] and zoo["admin.enableServer"] == "false"
    assert json.loads((stack.layout.state / "topology.json").read_text())["mode"] == stack.topology().mode


def test_every_cluster_jvm_has_its_heap_role_and_ports(tmp_path: Path) -> None:
    s = offset(region_servers=2, gateways=2, regionserver_heap_mb=800, gateway_heap_mb=200)
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    topo = plan_topology(s)
    argv = {p.name: server_argv(p, s, layout) for p in topo.processes}
    rs2 = argv["regionserver-2"]
    assert "-Xmx800m" in rs2 and rs2[-4:] == ["org.apache.hadoop.hbase.regionserver.HRegionServer", "-D",
                                               "hbase.regionserver.port=16121", "start"]
    assert argv["gateway-2"][-3:] == ["gateway", "9200", "9201"] and "-Xmx200m" in argv["gateway-2"]
    assert argv["master"][-2:] == ["org.apache.hadoop.hbase.master.HMaster", "start"]
    assert argv["zookeeper"][-1] == str(layout.conf / "zoo.cfg")
    for name, cmd in argv.items():
        assert any(a.startswith("-Xmx") for a in cmd), name
        if name != "kafka":
            assert "-XX:OnOutOfMemoryError=kill -9 %p" in cmd, name
    standalone = plan_topology(StackSettings())
    assert server_argv(standalone.process("hbase"), StackSettings(), layout)[-3:] == ["standalone", "9090", "9091"]


def test_settings_file_keys_reach_the_stack(tmp_path: Path) -> None:
    settings = StackProfile.model_validate({"stack": {"region_servers": 2, "gateways": 1, **CLUSTER}})
    assert LocalStack(settings.stack).topology().mode == "cluster"


def test_a_cluster_is_not_started_over_a_running_one_jvm_stack(tmp_path: Path) -> None:
    import sys

    standalone = LocalStack(offset(state_dir=tmp_path / "state"))
    standalone.hbase.start([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cluster = LocalStack(offset(state_dir=tmp_path / "state", region_servers=1, gateways=1))
        with pytest.raises(StackError, match=r"runs hbase, which this cluster stack does not have .*stack down"):
            cluster._check_other_shape()
        # `down` of the cluster shape also stops the one-JVM process the state folder names
        assert "hbase" in cluster.down()
        assert standalone.hbase.pid() is None
    finally:
        standalone.hbase.stop(timeout_s=5)



def test_netns_puts_each_cluster_server_at_its_namespace_address() -> None:
    s = offset(region_servers=2, gateways=1, hdfs=True, netns=True, netns_prefix="ab", netns_subnet="10.9.0.0/24")
    topo = plan_topology(s)
    assert topo.network is not None and topo.network.bridge == "abbr"
    hosts = {p.name: p.host for p in topo.processes}
    assert hosts == {"kafka": "127.0.0.1", "zookeeper": "10.9.0.2", "namenode": "10.9.0.4", "datanode-1": "10.9.0.51",
                     "master": "10.9.0.3", "regionserver-1": "10.9.0.11", "regionserver-2": "10.9.0.12",
                     "gateway-1": "10.9.0.31"}
    assert topo.gateways[0].host == "10.9.0.31" and topo.zookeeper_host == "10.9.0.2"
    back = topology_from_json(topo.to_json())
    assert back == topo
    plain = plan_topology(offset(region_servers=2, gateways=1))
    assert plain.network is None and "netns" not in plain.to_json() and '"host": "10.' not in plain.to_json()


def test_netns_is_refused_without_a_cluster() -> None:
    with pytest.raises(ValueError, match="netns runs only under a local cluster"):
        offset(netns=True)


def test_netns_servers_bind_to_and_announce_their_address(tmp_path: Path) -> None:
    s = offset(region_servers=1, gateways=1, hdfs=True, netns=True)
    topo = plan_topology(s)
    lay = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    master = server_argv(topo.process("master"), s, lay)
    assert master[-5:] == ["-D", "hbase.master.hostname=10.213.0.3", "-D", "hbase.master.ipc.address=10.213.0.3",
                           "start"]
    rs = server_argv(topo.process("regionserver-1"), s, lay)
    assert "hbase.unsafe.regionserver.hostname=10.213.0.11" in rs and "hbase.regionserver.ipc.address=10.213.0.11" in rs
    assert "-Dhbase.stack.bind=10.213.0.31" in server_argv(topo.process("gateway-1"), s, lay)
    assert "dfs.datanode.hostname=10.213.0.51" in server_argv(topo.process("datanode-1"), s, lay)
    plain = plan_topology(offset(region_servers=1, gateways=1))
    assert not any("hostname=" in a or "stack.bind" in a
                   for p in plain.processes for a in server_argv(p, offset(region_servers=1, gateways=1), lay))
