"""The stack's parts behind one interface (devstack.part): which parts a stack lists, in which order,
and how their round trips' failures are worded (no server starts)."""

from pathlib import Path

import pytest

from devstack import LocalStack
from devstack.cdc import CdcServers
from devstack.hdfs_servers import HdfsServers
from devstack.kafka_part import KafkaPart
from devstack.krb_servers import KerberosServers
from devstack.registry import RegistryPart
from devstack.settings import StackSettings
from devstack.topology import ServerProcess
from pipeline.errors import StackError


def _stack(tmp_path: Path, **values: object) -> LocalStack:
    return LocalStack(StackSettings.model_validate({"state_dir": tmp_path / "state", "cache_dir": tmp_path / "cache",
                                                    **values}))


def test_parts_are_listed_in_the_order_their_processes_start(tmp_path: Path) -> None:
    assert [type(p) for p in _stack(tmp_path)._parts] == [KafkaPart]
    full = _stack(tmp_path, kerberos=True, registry=True, cdc=True)
    assert [type(p) for p in full._parts] == [KafkaPart, KerberosServers, RegistryPart, CdcServers]
    cluster = _stack(tmp_path / "c", region_servers=2, gateways=1, hdfs=True, kerberos=True)
    assert [type(p) for p in cluster._parts] == [KafkaPart, KerberosServers, HdfsServers]
    for stack in (full, cluster):
        roles = [p.role for p in stack.topology().processes if any(p.role in a.roles for a in stack._parts)]
        owners = [next(i for i, a in enumerate(stack._parts) if role in a.roles) for role in roles]
        assert owners == sorted(owners)  # each part's processes start before the next part's
    assert [a.beneath_hbase for a in cluster._parts] == [False, False, True]
    assert [a.core for a in cluster._parts] == [True, False, False]
    assert cluster.hdfs is not None and cluster.hdfs.what == "HDFS (NameNode 127.0.0.1:9880)"


class _Part:
    roles = frozenset({"registry"})
    core = False

    def __init__(self, error: Exception, beneath_hbase: bool = False) -> None:
        self.error = error
        self.beneath_hbase = beneath_hbase
        self.what = "the fake part"

    def provisioned(self) -> bool:
        return True

    def provision(self) -> bool:
        return False

    def render(self) -> None: ...

    def start(self, proc: ServerProcess, deadline: float) -> None: ...

    def wait_ready(self, deadline: float) -> None: ...

    def ready(self, timeout_s: float) -> None:
        raise self.error

    def stop(self) -> None: ...

    def status(self) -> list[str]:
        return []


def test_a_part_s_failed_round_trip_is_worded_unless_it_worded_it_itself(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    stack._parts = [_Part(OSError("refused"))]
    with pytest.raises(StackError, match=r"^the fake part failed its round trip: OSError\('refused'\)$"):
        stack._check_parts(1.0, beneath_hbase=False)
    stack._parts = [_Part(StackError("connector x is not registered"))]
    with pytest.raises(StackError, match=r"^connector x is not registered$"):
        stack._check_parts(1.0, beneath_hbase=False)
    stack._parts = [_Part(OSError("not under HBase"), beneath_hbase=True)]
    stack._check_parts(1.0, beneath_hbase=False)  # checked with HBase's round trip, not after it


def test_a_core_part_s_failed_round_trip_passes_as_raised(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    core = _Part(OSError("refused"))
    core.core = True
    stack._parts = [core]
    with pytest.raises(OSError, match=r"^refused$"):
        stack._check_parts(1.0, beneath_hbase=False, core=True)
    stack._check_parts(1.0, beneath_hbase=False)  # checked before HBase's round trip, not after it
