"""The layering rules of the code base, checked on every test run."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    """Pure logic (pipeline.rowkey, pipeline.core) imports no I/O library; connectors know no runtime."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is part of the dev extras"
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout[-3000:]


def test_only_connectors_import_client_libraries() -> None:
    offenders = []
    for path in (ROOT / "pipeline").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in ("aiokafka", "happybase", "thriftpy2", "Hbase_thrift"):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_every_public_module_declares_all() -> None:
    missing = []
    for pkg in ("pipeline", "connectors", "devstack"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path.name in ("__main__.py",) or (path.stem.startswith("_") and path.name != "__init__.py"):
                continue
            tree = ast.parse(path.read_text())
            has_defs = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in tree.body)
            declares = any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets)
                           for n in tree.body)
            if has_defs and not declares:
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"modules without __all__: {missing}"


def test_outside_the_rowkey_package_no_code_tests_a_segment_s_class() -> None:
    """Segments answer for themselves (``Segment.numeric``, ``.time_descending``, ``.key_op``...): no
    module outside ``pipeline/rowkey`` imports a segment kind (the ``Segment`` base, for types, is fine)."""
    offenders = []
    for top in ("pipeline", "connectors", "devstack", "bench"):
        for path in (ROOT / top).rglob("*.py"):
            if path.is_relative_to(ROOT / "pipeline" / "rowkey"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipeline.rowkey.segments"):
                    kinds = [a.name for a in node.names if a.name != "Segment"]
                    if kinds:
                        offenders.append(f"{path.relative_to(ROOT)} imports {', '.join(kinds)}")
    assert not offenders, offenders
