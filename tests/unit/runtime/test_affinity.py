"""``[runtime] cpu_affinity``: applied to the process, refused with the CPUs named when unknown."""

from __future__ import annotations

import os

import pytest

from pipeline.errors import ConfigError
from pipeline.runtime.process.affinity import pin_cpus
from pipeline.settings import Settings


def test_empty_leaves_the_process_alone_and_unknown_cpus_are_named() -> None:
    before = os.sched_getaffinity(0)
    pin_cpus([])
    assert os.sched_getaffinity(0) == before
    with pytest.raises(ConfigError, match=r"CPU\(s\) \[4096\] are not available"):
        pin_cpus([4096])
    assert os.sched_getaffinity(0) == before


def test_pins_and_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = os.sched_getaffinity(0)
    cpu = min(before)
    monkeypatch.setenv("HBASE_INGEST_RUNTIME__CPU_AFFINITY", f"[{cpu}]")
    assert Settings().runtime.cpu_affinity == [cpu]
    try:
        pin_cpus([cpu])
        assert os.sched_getaffinity(0) == {cpu}
    finally:
        os.sched_setaffinity(0, before)
