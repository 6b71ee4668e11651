"""The wheel carries what an installed copy needs to run (the local stack, devstack, and its infra files included)
and nothing that runs from a checkout only (bench, tests)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from devstack import layout

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_the_stack_infra_and_no_bench(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True, timeout=120)
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # the peer benchmark's Flume agent, Flink job and loader, the fault tests' region admin: run from a
    # checkout only
    bench_only = ("flume/", "flink/", "loader/", "RegionAdmin.java")
    infra = {f"devstack/infra/{p.relative_to(ROOT / 'infra').as_posix()}"
             for p in (ROOT / "infra").rglob("*") if p.is_file() and p.name != "Dockerfile"}
    stack_infra = {n for n in infra if not n.removeprefix("devstack/infra/").startswith(bench_only)}
    assert stack_infra and stack_infra <= names
    assert not infra - stack_infra & names
    profiles = {f"pipeline/cli/config/{p.name}" for p in (ROOT / "config").glob("*.toml")}
    assert "pipeline/cli/config/demo.toml" in profiles and profiles <= names
    assert "connectors/hbase/thrift2_idl.py" in names and "pipeline/cli/__init__.py" in names
    # the local stack, a top-level package of its own beside the worker's (`stack up` from an installed wheel)
    assert "devstack/__init__.py" in names and "devstack/settings.py" in names
    assert not [n for n in names if n.startswith("connectors/stack/")]
    # the compiled put encoder, built for this Python (hatch_build.py), and its source
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"connectors/hbase/_putwire{suffix}" in names and "connectors/hbase/_putwire.c" in names
    assert not [n for n in names if n.endswith(".part")]
    assert not [n for n in names if n.startswith(("bench/", "tests/", "infra/", "config/"))]


def test_infra_is_the_checkouts_else_the_installed_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HBASE_INGEST_INFRA", raising=False)
    assert layout.infra_dir() == ROOT / "infra"  # this checkout
    installed = tmp_path / "site-packages" / "devstack"
    installed.mkdir(parents=True)
    monkeypatch.setattr(layout, "__file__", str(installed / "layout.py"))
    assert layout.infra_dir() == installed / "infra"  # no infra/ beside the package: the wheel's copy
    monkeypatch.setenv("HBASE_INGEST_INFRA", str(tmp_path / "mine"))
    assert layout.infra_dir() == tmp_path / "mine"
