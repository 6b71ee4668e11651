"""The HBase launcher is compiled once into the cache and run as a class by every HBase JVM."""

from __future__ import annotations

import shutil
from pathlib import Path

from devstack import LocalStack
from devstack.launch import server_argv
from devstack.layout import StackLayout
from devstack.provision import ensure_launcher
from devstack.settings import StackSettings
from devstack.topology import plan_topology


def test_the_launcher_is_compiled_once_into_the_cache_and_run_as_a_class(stack: LocalStack, tmp_path: Path) -> None:
    """With javac, every HBase JVM runs the compiled HBaseStack class (no compile at each start); a
    changed source gets a folder of its own; without a compiled class the source launcher is used."""
    infra = tmp_path / "infra"
    shutil.copytree(stack.layout.infra, infra)
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra)
    layout.hbase_lib.parent.mkdir(parents=True)
    layout.hbase_lib.symlink_to(stack.layout.hbase_lib)  # the stack's cached jars, without copying them
    first = ensure_launcher(layout)
    assert first is not None and (first / "HBaseStack.class").is_file()
    mtime = (first / "HBaseStack.class").stat().st_mtime_ns
    assert ensure_launcher(layout) == first and (first / "HBaseStack.class").stat().st_mtime_ns == mtime
    (infra / "HBaseStack.java").write_text((infra / "HBaseStack.java").read_text() + "\n// changed\n")
    second = ensure_launcher(layout)
    assert second is not None and second != first and [p.name for p in second.parent.iterdir()
                                                        if p.name.startswith(".")] == []
    s = StackSettings()
    hbase = plan_topology(s).process("hbase")
    argv = server_argv(hbase, s, layout, second)
    assert argv[-4:] == ["HBaseStack", "standalone", "9090", "9091"]
    assert f":{second}:" in argv[argv.index("-cp") + 1]
    assert server_argv(hbase, s, layout)[-4] == str(infra / "HBaseStack.java")
