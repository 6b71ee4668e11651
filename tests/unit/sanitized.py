"""The compiled parts under AddressSanitizer and UndefinedBehaviorSanitizer (``make sanitize``): their
builds, in a folder of their own, and the pytest plugin that runs the tests against those builds.

``python -m tests.unit.sanitized DIR`` compiles every part of ``hatch_build.EXTENSIONS`` with
``hatch_build.SANITIZE`` and the strict warnings into ``DIR``, under its package path
(``DIR/connectors/hbase/_putwire`` + the extension suffix); the builds beside the sources, which the
virtualenv imports, are left as they are.

``pytest -p tests.unit.sanitized --sanitized-builds DIR`` imports those files as the extension modules:
a finder ahead of the normal ones, installed before any conftest imports the package. The run stops
before its first test unless :func:`pipeline.compiled.load` returns exactly those files (a sanitized
build that does not load, or one of another source, would otherwise leave the tests quietly running the
normal builds or the pure-Python forms); its header names them. A test that runs the pure-Python form
of a part only (the ``python`` case of ``test_thrift2_putwire.py``'s ``encode``) runs no compiled code,
so it is left out. The interpreter is not built with the sanitizers, so the process must preload their
runtimes (the Makefile's ``sanitize`` target does).
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import sys
import sysconfig
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest

import hatch_build

__all__ = ["build", "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure",
           "pytest_load_initial_conftests", "pytest_report_header"]

ROOT = Path(__file__).resolve().parents[2]
#: extension module name -> (its C source, its build's path under the folder of the builds)
PARTS = {module.replace("/", "."): (ROOT / source, module + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
         for source, module in hatch_build.EXTENSIONS.items()}
_OPTION = "--sanitized-builds"


def build(folder: Path) -> list[Path]:
    """Compile every compiled part, sanitized and with every warning an error, into ``folder``; returns
    the files. Raises ``RuntimeError`` with the compiler's output when one fails."""
    return [hatch_build.compile_extension(ROOT, source, module, strict=True, into=folder,
                                          codegen=hatch_build.SANITIZE)
            for source, module in hatch_build.EXTENSIONS.items()]


class _SanitizedBuilds(importlib.abc.MetaPathFinder):
    """Finds the extension modules of :data:`PARTS` in ``folder``, and nothing else."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __repr__(self) -> str:
        return f"_SanitizedBuilds({str(self.folder)!r})"

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in PARTS:
            return None
        return importlib.util.spec_from_file_location(fullname, self.folder / PARTS[fullname][1])


def _folder(config: pytest.Config) -> Path:
    given: str | None = config.known_args_namespace.sanitized_builds
    if not given:
        raise pytest.UsageError(f"-p tests.unit.sanitized needs {_OPTION} DIR (python -m tests.unit.sanitized DIR)")
    return Path(given).resolve()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(_OPTION, metavar="DIR", help="import the compiled parts from the sanitized builds in DIR")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before the conftests, which import the package and so the extension modules."""
    folder = _folder(early_config)
    if not hasattr(ctypes.CDLL(None), "__asan_init"):  # else the import would end the process, its message captured
        raise pytest.UsageError("AddressSanitizer's runtime is not loaded: run with "
                                "LD_PRELOAD=$(gcc -print-file-name=libasan.so) (make sanitize)")
    sys.meta_path.insert(0, _SanitizedBuilds(folder))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Stop the run unless every compiled part in use is its sanitized build."""
    from pipeline import compiled

    folder = _folder(config)
    for module, (source, file) in PARTS.items():
        found = compiled.load(module, source)
        where = None if found is None else Path(str(found.__file__)).resolve()
        if where != folder / file:
            raise pytest.UsageError(f"{module} in use is {where or 'not compiled (its pure-Python form)'}, "
                                    f"not the sanitized build {folder / file} of the current {source.name}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests of the pure-Python forms only (module docstring)."""
    pure = [i for i in items if isinstance(i, pytest.Function) and hasattr(i, "callspec")
            and i.callspec.params.get("encode") == "python"]
    if pure:
        config.hook.pytest_deselected(items=pure)
        items[:] = [i for i in items if i not in pure]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"compiled part in use: {sys.modules[module].__file__} (sanitized build)" for module in PARTS]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.unit.sanitized DIR")
    try:
        build(Path(sys.argv[1]))
    except RuntimeError as exc:
        sys.exit(str(exc))
