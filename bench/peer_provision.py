"""Flume's jars for the peer benchmark: resolved once from Maven Central (``infra/flume/pom.xml``)
into the project's jar cache, beside the stack's own classpaths, and merged behind the stack's
HBase client jars.

The cache folder is ``<cache>/flume-<version>/lib`` (the cache root is the stack's, see
:mod:`connectors.stack.layout`); it counts only once its ``.complete`` marker exists, so an
interrupted download is redone rather than half-used.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from connectors.stack.layout import StackLayout

from .peer_flume import FLUME_VERSION, merge_classpath

__all__ = ["FLUME_POM", "LOADER_SOURCE", "ProvisionError", "ensure_flume_lib", "flume_classpath", "flume_lib"]

_INFRA = Path(__file__).resolve().parents[1] / "infra"
FLUME_POM = _INFRA / "flume" / "pom.xml"
FLUME_LOG4J = _INFRA / "flume" / "log4j2.properties"
LOADER_SOURCE = _INFRA / "loader" / "BufferedMutatorLoader.java"
_DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class ProvisionError(RuntimeError):
    """Flume's jars could not be resolved; the message carries Maven's last lines."""


def flume_lib(layout: StackLayout) -> Path:
    return layout.cache / f"flume-{FLUME_VERSION}" / "lib"


def ensure_flume_lib(layout: StackLayout, timeout_s: float = 1800) -> bool:
    """Resolve Flume's runtime jars into :func:`flume_lib` unless complete there. Returns True
    when it downloaded. Raises :class:`ProvisionError` when ``mvn`` is missing or fails."""
    out = flume_lib(layout)
    if (out / ".complete").exists():
        return False
    if shutil.which("mvn") is None:
        raise ProvisionError("`mvn` was not found on PATH: install Maven 3.8+ (e.g. `apt-get install maven`)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = ["mvn", "-B", "-q", f"-Dmaven.repo.local={layout.m2}", "-f", str(FLUME_POM),
           f"-Dflume.version={FLUME_VERSION}", f"{_DEP_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={out}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ProvisionError(f"Maven did not resolve Flume within {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise ProvisionError(f"Maven could not resolve Flume {FLUME_VERSION} ({FLUME_POM}):\n{tail}")
    (out / ".complete").write_text("ok\n")
    return True


def flume_classpath(layout: StackLayout) -> list[Path]:
    """The agent's classpath: the stack's HBase jars (sorted by name), then Flume's whose artifact
    is not among them. Raises :class:`ProvisionError` when either folder is missing."""
    for lib in (layout.hbase_lib, flume_lib(layout)):
        if not (lib / ".complete").exists():
            raise ProvisionError(f"{lib} is not complete: run `hbase-ingest stack up` and ensure_flume_lib first")
    return merge_classpath(sorted(layout.hbase_lib.glob("*.jar")), sorted(flume_lib(layout).glob("*.jar")))
