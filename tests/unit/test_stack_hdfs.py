"""The cluster on HDFS (``stack up --hdfs``): its processes and ports, the rendered Hadoop and HBase
configs, the NameNode's and DataNodes' command lines, and the refusal of HDFS without a cluster."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from devstack import LocalStack
from devstack.hdfs import WEBAPPS, replication
from devstack.launch import namenode_format_argv, server_argv
from devstack.layout import StackLayout, infra_dir
from devstack.settings import StackSettings
from devstack.topology import plan_topology, topology_from_json
from pipeline.errors import ConfigError, StackError

PORTS = {"zookeeper_port": 2281, "master_port": 16100, "regionserver_port": 16120, "thrift_port": 9190,
         "thrift2_port": 9191, "kafka_port": 9192, "kafka_controller_port": 9193, "namenode_port": 19070,
         "datanode_port": 19080}


def hdfs(**values: object) -> StackSettings:
    return StackSettings.model_validate({**PORTS, "region_servers": 2, "gateways": 1, "hdfs": True, **values})


def _props(path: Path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.iter("property")}


def test_hdfs_runs_between_zookeeper_and_the_master_on_its_ports() -> None:
    topo = plan_topology(hdfs(datanodes=2))
    assert [p.name for p in topo.processes] == ["kafka", "zookeeper", "namenode", "datanode-1", "datanode-2",
                                                "master", "regionserver-1", "regionserver-2", "gateway-1"]
    assert topo.process("namenode").ports == {"namenode": 19070, "namenode http": 19071}
    assert topo.process("datanode-2").ports == {"datanode": 19083, "datanode ipc": 19084, "datanode http": 19085}
    assert topo.namenode == topo.process("namenode")
    assert topology_from_json(topo.to_json()) == topo
    assert plan_topology(hdfs(hdfs=False)).namenode is None


def test_hdfs_without_a_cluster_is_refused_by_settings_and_cli(tmp_path: Path) -> None:
    from pipeline.cli.stack import _settings

    with pytest.raises(ValueError, match="hdfs runs only under a local cluster"):
        StackSettings(hdfs=True)
    config = tmp_path / "c.toml"
    config.write_text(f'[stack]\nstate_dir = "{tmp_path}"\n')
    with pytest.raises(ConfigError, match=r"^--hdfs: .*--region-servers 2 --gateways 2 --hdfs"):
        _settings(config, None, None, hdfs=True)
    assert _settings(config, 2, 2, hdfs=True).hdfs


def test_hdfs_ports_that_collide_are_named() -> None:
    with pytest.raises(StackError, match="port 19071 is assigned to both namenode namenode http and datanode-1"):
        plan_topology(hdfs(datanode_port=19071))


@pytest.mark.parametrize(("datanodes", "copies"), [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_replication_is_hdfs_default_or_one_copy_per_datanode(datanodes: int, copies: int) -> None:
    assert replication(datanodes) == copies


def test_configs_put_hbase_root_and_wals_on_hdfs(tmp_path: Path) -> None:
    stack = LocalStack(hdfs(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", datanodes=2))
    stack._render()
    conf = stack.layout.conf
    site = _props(conf / "hbase" / "hbase-site.xml")
    assert site["hbase.rootdir"] == "hdfs://127.0.0.1:19070/hbase" == stack.hbase_root
    assert site["hbase.wal.provider"] == "asyncfs"
    assert site["hbase.unsafe.stream.capability.enforce"] == "true"  # HBase's default
    for folder in (conf / "hadoop", conf / "hbase"):  # the servers' config, and the HBase JVMs' classpath
        core, hdfs_site = _props(folder / "core-site.xml"), _props(folder / "hdfs-site.xml")
        assert core["fs.defaultFS"] == "hdfs://127.0.0.1:19070"
        assert hdfs_site["dfs.replication"] == "2"
        assert hdfs_site["dfs.namenode.rpc-address"] == "127.0.0.1:19070"
        assert hdfs_site["dfs.namenode.http-address"] == "127.0.0.1:19071"
        assert hdfs_site["dfs.namenode.name.dir"] == f"file://{tmp_path}/state/hdfs/name"
        assert all(v.startswith("127.0.0.1:") for k, v in hdfs_site.items() if k.endswith("address"))
    assert all((conf / "hadoop" / "webapps" / app).is_dir() for app in WEBAPPS)
    assert stack.webhdfs is not None and stack.webhdfs.base == "http://127.0.0.1:19071/webhdfs/v1"


def test_a_local_filesystem_cluster_keeps_no_hdfs_config(tmp_path: Path) -> None:
    state = tmp_path / "state"
    LocalStack(hdfs(state_dir=state, cache_dir=tmp_path / "cache"))._render()
    local = LocalStack(hdfs(state_dir=state, cache_dir=tmp_path / "cache", hdfs=False))
    local._render()
    conf = local.layout.conf / "hbase"
    assert not (conf / "core-site.xml").exists() and not (conf / "hdfs-site.xml").exists()
    site = _props(conf / "hbase-site.xml")
    assert site["hbase.rootdir"] == f"file://{state}/hbase/root" and site["hbase.wal.provider"] == "filesystem"
    assert local.webhdfs is None


def test_namenode_and_datanode_command_lines(tmp_path: Path) -> None:
    s = hdfs(datanodes=2, namenode_heap_mb=200, datanode_heap_mb=160)
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    topo = plan_topology(s)
    nn = server_argv(topo.process("namenode"), s, layout)
    dn = server_argv(topo.process("datanode-2"), s, layout)
    assert nn[-1] == "org.apache.hadoop.hdfs.server.namenode.NameNode" and "-Xmx200m" in nn
    assert nn[nn.index("-cp") + 1] == f"{layout.conf / 'hadoop'}:{layout.hadoop_lib}/*"
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in nn and "-XX:OnOutOfMemoryError=kill -9 %p" in nn
    main = dn.index("org.apache.hadoop.hdfs.server.datanode.DataNode")
    assert "-Xmx160m" in dn and dn[main + 1:] == [
        "-D", f"dfs.datanode.data.dir=file://{tmp_path}/state/hdfs/data-2",
        "-D", "dfs.datanode.address=127.0.0.1:19083", "-D", "dfs.datanode.ipc.address=127.0.0.1:19084",
        "-D", "dfs.datanode.http.address=127.0.0.1:19085", "-D", "dfs.datanode.https.address=127.0.0.1:19085",
        "-D", "dfs.datanode.hostname=127.0.0.1"]
    assert namenode_format_argv(layout)[-4:] == ["-format", "-nonInteractive", "-clusterId", "hbase-ingest"]


def test_status_lists_the_hdfs_processes(tmp_path: Path) -> None:
    stack = LocalStack(hdfs(state_dir=tmp_path))
    st = stack.status()
    names = [p.name for p in st.processes]
    assert names[2:4] == ["namenode", "datanode-1"]
    assert st.ports["namenode"] == 19070 and st.ports["datanode-1 datanode"] == 19080
    assert stack.hbase_pids().keys() >= {"namenode", "datanode-1"}
