"""The compiled parts (``hatch_build.py``, :mod:`pipeline.compiled`): built wherever there is a C
compiler, in use, told apart from a build of another source, and turned off on request. What each
computes is checked against its pure-Python form by its own property tests
(``test_thrift2_putwire.py``, ``core/test_routerun.py``, ``native/test_multiwire.py``, ``native/test_multiread.py``)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from connectors.hbase import putwire
from connectors.hbase.native import multi
from pipeline import compiled
from pipeline.core.routes import router as routing

ROOT = Path(__file__).resolve().parents[2]
PARTS = {"connectors.hbase._putwire": ROOT / "connectors/hbase/_putwire.c",
         "pipeline.core.routes._routerun": ROOT / "pipeline/core/routes/_routerun.c",
         "connectors.hbase.native._multiwire": ROOT / "connectors/hbase/native/_multiwire.c"}


def test_every_compiled_part_is_built_from_its_current_source_and_in_use() -> None:
    """The test command builds with ``HBASE_INGEST_REQUIRE_COMPILED=1``, so a failed build stops it; this
    catches a build left from an older source (``pip install -e .`` rebuilds)."""
    cc = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))[0]
    assert shutil.which(cc), f"no C compiler ({cc}) to build the compiled parts"
    import hatch_build

    assert {src.relative_to(ROOT).as_posix() for src in PARTS.values()} == set(hatch_build.EXTENSIONS)
    for module, source in PARTS.items():
        assert compiled.load(module, source) is not None, f"{module} is not built from the current {source.name}"
    assert putwire.COMPILED and routing._ROUTERUN is not None and multi.COMPILED


def test_a_build_of_another_source_is_not_used(tmp_path: Path) -> None:
    newer = tmp_path / "_routerun.c"
    newer.write_text("/* a newer source */\n")
    assert compiled.load("pipeline.core.routes._routerun", newer) is None
    assert compiled.load("pipeline.core.routes._routerun", tmp_path / "absent.c") is not None  # an install without it
    assert compiled.load("pipeline.core._no_such_part", tmp_path / "absent.c") is None


def test_the_pure_python_forms_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "from connectors.hbase import putwire; from pipeline.core.routes import router as routing; " \
           "print(putwire.COMPILED, routing._ROUTERUN)"
    env = {**os.environ, "HBASE_INGEST_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          cwd=ROOT)
    assert done.stdout.split() == ["False", "None"]
    monkeypatch.setenv("HBASE_INGEST_PURE_PYTHON", "1")
    routerun = "pipeline.core.routes._routerun"
    assert compiled.pure_python() and compiled.load(routerun, PARTS[routerun]) is None
