"""The stack's parts behind one interface (devstack.part): which parts a stack lists, in which order,
and how their round trips' failures are worded (no server starts)."""

from pathlib import Path

import pytest

from devstack import LocalStack
from devstack.cdc import CdcServers
from devstack.hbase_part import HBasePart
from devstack.hdfs_servers import HdfsServers
from devstack.kafka_part import KafkaPart
from devstack.kdc_part import KdcPart
from devstack.krb_servers import KerberizedHBase
from devstack.registry import RegistryPart
from devstack.settings import StackSettings
from devstack.topology import ServerProcess
from pipeline.errors import StackError


def _stack(tmp_path: Path, **values: object) -> LocalStack:
    return LocalStack(StackSettings.model_validate({"state_dir": tmp_path / "state", "cache_dir": tmp_path / "cache",
                                                    **values}))


def test_every_process_belongs_to_one_part_and_parts_are_listed_in_dependency_order(tmp_path: Path) -> None:
    assert [type(p) for p in _stack(tmp_path)._parts] == [KafkaPart, HBasePart]
    full = _stack(tmp_path, kerberos=True, registry=True, cdc=True)
    assert [type(p) for p in full._parts] == [KdcPart, KafkaPart, HBasePart, KerberizedHBase, RegistryPart,
                                              CdcServers]
    cluster = _stack(tmp_path / "c", region_servers=2, gateways=1, hdfs=True, kerberos=True)
    assert [type(p) for p in cluster._parts] == [KdcPart, KafkaPart, HdfsServers, HBasePart, KerberizedHBase]
    for stack in (full, cluster):
        for proc in stack.topology().processes:
            assert len([a for a in stack._parts if proc.role in a.roles]) == 1, proc.name
    assert cluster.hdfs is not None and cluster.hdfs.what == "HDFS (NameNode 127.0.0.1:9880)"
    # HBase's configuration takes the KDC's security, then HDFS's files (whose core-site.xml replaces the KDC's)
    assert cluster.hbase_part.contributors == [cluster.kdc, cluster.hdfs]
    assert full.hbase_part.contributors == []


class _Part:
    roles = frozenset({"registry"})

    def __init__(self, error: Exception | None, what: str = "the fake part") -> None:
        self.error = error
        self.what = what
        self.calls: list[str] = []

    def provisioned(self) -> bool:
        return True

    def provision(self) -> bool:
        return False

    def render(self) -> None:
        self.calls.append("render")

    def start(self, proc: ServerProcess, deadline: float) -> None: ...

    def wait_ready(self, deadline: float) -> None: ...

    def ready(self, timeout_s: float) -> None:
        self.calls.append("ready")
        if self.error is not None:
            raise self.error

    def stop(self) -> None: ...

    def status(self) -> list[str]:
        return []


def test_a_part_s_failed_round_trip_is_worded_unless_it_worded_it_itself(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    stack._parts = [_Part(OSError("refused"))]
    with pytest.raises(StackError, match=r"^the fake part failed its round trip: OSError\('refused'\)$"):
        stack.check_ready(1.0)
    stack._parts = [_Part(StackError("connector x is not registered"))]
    with pytest.raises(StackError, match=r"^connector x is not registered$"):
        stack.check_ready(1.0)


def test_parts_are_checked_in_list_order_and_the_first_failure_stops_the_check(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    first, failing, after = _Part(None, "first"), _Part(OSError("down"), "failing"), _Part(None, "after")
    stack._parts = [first, failing, after]
    with pytest.raises(StackError, match=r"^failing failed its round trip"):
        stack.check_ready(1.0)
    assert (first.calls, failing.calls, after.calls) == (["ready"], ["ready"], [])
