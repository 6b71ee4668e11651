"""The peers' jars for the peer benchmark: resolved once from Maven Central into the project's jar
cache, beside the stack's own classpaths. Flume's (``infra/flume/pom.xml``) are merged behind the
stack's HBase client jars; Flink's (``infra/flink/pom.xml``) form a classpath of their own, with the
job (``infra/flink/FlinkPeerJob.java``) compiled once against them.

The cache folders are ``<cache>/flume-<version>/lib``, ``<cache>/flink-<version>/lib-<pom digest>``
and ``<cache>/flink-<version>/job-<source and pom digest>`` (the cache root is the stack's, see
:mod:`devstack.layout`; a digest in the name means an edited pom or source is resolved or
compiled afresh). Each counts only once its ``.complete`` marker exists, so an interrupted download
or build is redone rather than half-used.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from devstack.layout import StackLayout

from .peer_flink import FLINK_VERSION, flink_classpath
from .peer_flume import FLUME_VERSION, merge_classpath

__all__ = [
    "FLINK_LOG4J",
    "FLINK_POM",
    "FLINK_SOURCE",
    "FLUME_POM",
    "LOADER_SOURCE",
    "ProvisionError",
    "ensure_flink",
    "ensure_flink_lib",
    "ensure_flume_lib",
    "flink_job_classes",
    "flink_lib",
    "flume_classpath",
    "flume_lib",
]

_INFRA = Path(__file__).resolve().parents[1] / "infra"
FLUME_POM = _INFRA / "flume" / "pom.xml"
FLUME_LOG4J = _INFRA / "flume" / "log4j2.properties"
LOADER_SOURCE = _INFRA / "loader" / "BufferedMutatorLoader.java"
FLINK_POM = _INFRA / "flink" / "pom.xml"
FLINK_LOG4J = _INFRA / "flink" / "log4j2.properties"
FLINK_SOURCE = _INFRA / "flink" / "FlinkPeerJob.java"
_DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class ProvisionError(RuntimeError):
    """A peer's jars could not be resolved or its job compiled; the message carries the tool's last lines."""


def flume_lib(layout: StackLayout) -> Path:
    return layout.cache / f"flume-{FLUME_VERSION}" / "lib"


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _copy_dependencies(layout: StackLayout, pom: Path, out: Path, what: str, timeout_s: float,
                       *props: str) -> bool:
    """Resolve ``pom``'s runtime jars into ``out`` unless complete there (see the module docstring)."""
    if (out / ".complete").exists():
        return False
    if shutil.which("mvn") is None:
        raise ProvisionError("`mvn` was not found on PATH: install Maven 3.8+ (e.g. `apt-get install maven`)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = ["mvn", "-B", "-q", f"-Dmaven.repo.local={layout.m2}", "-f", str(pom), *props,
           f"{_DEP_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ProvisionError(f"Maven did not resolve {what} within {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        raise ProvisionError(f"Maven could not resolve {what} ({pom}):\n{_tail(proc.stdout + proc.stderr)}")
    (out / ".complete").write_text("ok\n")
    return True


def ensure_flume_lib(layout: StackLayout, timeout_s: float = 1800) -> bool:
    """Resolve Flume's runtime jars into :func:`flume_lib` unless complete there. Returns True
    when it downloaded. Raises :class:`ProvisionError` when ``mvn`` is missing or fails."""
    return _copy_dependencies(layout, FLUME_POM, flume_lib(layout), f"Flume {FLUME_VERSION}", timeout_s,
                              f"-Dflume.version={FLUME_VERSION}")


def _digest(*files: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def flink_lib(layout: StackLayout) -> Path:
    return layout.cache / f"flink-{FLINK_VERSION}" / f"lib-{_digest(FLINK_POM)}"


def flink_job_classes(layout: StackLayout) -> Path:
    return layout.cache / f"flink-{FLINK_VERSION}" / f"job-{_digest(FLINK_SOURCE, FLINK_POM)}"


def ensure_flink_lib(layout: StackLayout, timeout_s: float = 1800) -> bool:
    """Resolve Flink's runtime jars (``infra/flink/pom.xml``) into :func:`flink_lib` unless complete
    there. Returns True when it downloaded. Raises :class:`ProvisionError` when ``mvn`` is missing
    or fails."""
    return _copy_dependencies(layout, FLINK_POM, flink_lib(layout), f"Flink {FLINK_VERSION}", timeout_s)


def ensure_flink(layout: StackLayout, timeout_s: float = 1800) -> list[Path]:
    """Flink's jars resolved (:func:`ensure_flink_lib`) and the job compiled against them with
    ``javac`` into :func:`flink_job_classes` unless complete there; returns the job's classpath
    (:func:`bench.peer_flink.flink_classpath`: the job's classes, then the jars). Raises
    :class:`ProvisionError` when Maven or ``javac`` fails, or the resolved jars break a pin."""
    ensure_flink_lib(layout, timeout_s)
    jars = sorted(flink_lib(layout).glob("*.jar"))
    classes = flink_job_classes(layout)
    try:
        classpath = flink_classpath(jars, classes)
    except ValueError as exc:
        raise ProvisionError(f"Flink's jars in {flink_lib(layout)}: {exc}") from exc
    if not (classes / ".complete").exists():
        if shutil.which("javac") is None:
            raise ProvisionError("`javac` was not found on PATH: install a JDK 17")
        if classes.exists():
            shutil.rmtree(classes)
        classes.mkdir(parents=True)
        cmd = ["javac", "-d", str(classes), "-cp", ":".join(str(j) for j in jars), str(FLINK_SOURCE)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise ProvisionError(f"javac could not compile {FLINK_SOURCE}:\n{_tail(proc.stdout + proc.stderr)}")
        (classes / ".complete").write_text("ok\n")
    return classpath


def flume_classpath(layout: StackLayout) -> list[Path]:
    """The agent's classpath: the stack's HBase jars (sorted by name), then Flume's whose artifact
    is not among them. Raises :class:`ProvisionError` when either folder is missing."""
    for lib in (layout.hbase_lib, flume_lib(layout)):
        if not (lib / ".complete").exists():
            raise ProvisionError(f"{lib} is not complete: run `hbase-ingest stack up` and ensure_flume_lib first")
    return merge_classpath(sorted(layout.hbase_lib.glob("*.jar")), sorted(flume_lib(layout).glob("*.jar")))
