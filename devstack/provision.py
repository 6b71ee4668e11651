"""Provisioning: check the tool chain, resolve the server classpaths from Maven Central into the
user cache (once), extract the Thrift2 IDL, compile the HBase launcher (once per version of its
source), and render configuration files into the state folder. The CDC stack's classpaths (Kafka
Connect, the Debezium plugin: :func:`ensure_cdc_classpaths`) and HDFS's (:func:`ensure_hadoop_classpath`) are
resolved only when asked for, as is the schema registry's server (:func:`ensure_registry_dist`).

Each classpath directory is complete only when its ``.complete`` marker exists, so an interrupted
download is redone rather than half-used.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from string import Template

from connectors.hbase.thrift2_idl import extract_idl
from pipeline.errors import StackError

from .hdfs import WEBAPPS
from .layout import (
    APICURIO_CONVERTER_VERSION,
    APICURIO_VERSION,
    DEBEZIUM_VERSION,
    HADOOP_VERSION,
    HBASE_THRIFT_VERSION,
    HBASE_VERSION,
    KAFKA_VERSION,
    StackLayout,
    write_private,
)

__all__ = [
    "APICURIO_SHA256",
    "APICURIO_URL",
    "cdc_classpaths_ready",
    "ensure_cdc_classpaths",
    "ensure_classpaths",
    "ensure_hadoop_classpath",
    "ensure_launcher",
    "ensure_registry_dist",
    "ensure_tools",
    "extract_archive",
    "render_configs",
    "render_hbase_configs",
    "render_hdfs_configs",
    "render_kafka_config",
]

_DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# slf4j 1.7 picks an arbitrary binding when several are present; HBase's own build excludes these.
_STRAY_BINDINGS = ("slf4j-reload4j-", "reload4j-", "slf4j-log4j12-")


def ensure_tools() -> None:
    """Raise :class:`StackError` with an install hint when java or mvn is missing."""
    for tool, hint in (("java", "install a JDK 17 (e.g. `apt-get install openjdk-17-jdk-headless`)"),
                       ("mvn", "install Maven 3.8+ (e.g. `apt-get install maven`)")):
        if shutil.which(tool) is None:
            raise StackError(f"`{tool}` was not found on PATH: {hint}")


def _mvn(layout: StackLayout, *args: str, timeout: float = 1800) -> None:
    cmd = ["mvn", "-B", "-q", f"-Dmaven.repo.local={layout.m2}", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"Maven did not finish within {timeout:.0f} s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).strip().splitlines()[-25:]
        text = "\n".join(out)
        if any(s in text for s in ("Unknown host", "Could not transfer", "Connection refused",
                                   "Network is unreachable", "timed out")):
            raise StackError("Maven Central is unreachable (check network/proxy settings, or a "
                             f"~/.m2/settings.xml mirror):\n{text}")
        raise StackError(f"Maven failed ({' '.join(args[:1])}):\n{text}")


def _copy_dependencies(layout: StackLayout, pom: Path, out: Path, version_args: list[str]) -> None:
    marker = out / ".complete"
    if marker.exists():
        return
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    _mvn(layout, "-f", str(pom), *version_args, f"{_DEP_PLUGIN}:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={out}")
    for jar in out.iterdir():
        if jar.name.startswith(_STRAY_BINDINGS):
            jar.unlink()
    marker.write_text("ok\n")


def ensure_classpaths(layout: StackLayout) -> bool:
    """Make sure both classpaths and the Thrift2 IDL are in the cache. Returns True if anything
    was downloaded (False: everything came from the cache)."""
    needed = not ((layout.kafka_lib / ".complete").exists() and (layout.hbase_lib / ".complete").exists()
                  and layout.thrift2_idl.exists())
    if not needed:
        return False
    ensure_tools()
    # a cheap probe that fails fast, with a clear message, when Central cannot be reached
    _mvn(layout, f"{_DEP_PLUGIN}:get", "-Dartifact=junit:junit:4.13.2", "-Dtransitive=false", timeout=300)
    _copy_dependencies(layout, layout.infra / "kafka" / "pom.xml", layout.kafka_lib,
                       [f"-Dkafka.version={KAFKA_VERSION}"])
    _copy_dependencies(layout, layout.infra / "hbase" / "pom.xml", layout.hbase_lib,
                       [f"-Dhbase.version={HBASE_VERSION}", f"-Dhbase.thrift.version={HBASE_THRIFT_VERSION}"])
    extract_idl(layout.hbase_lib / f"hbase-thrift-{HBASE_THRIFT_VERSION}.jar", layout.thrift2_idl)
    return True


def cdc_classpaths_ready(layout: StackLayout) -> bool:
    """Whether Connect's classpath, the Debezium plugin and Apicurio's converters in it are all cached."""
    return ((layout.connect_lib / ".complete").exists() and (layout.debezium_plugin / ".complete").exists()
            and (layout.debezium_plugin / f".apicurio-converter-{APICURIO_CONVERTER_VERSION}").exists())


def ensure_cdc_classpaths(layout: StackLayout) -> bool:
    """Make sure Kafka Connect's classpath (``infra/connect/pom.xml``) and the Debezium PostgreSQL plugin
    (``infra/connect/debezium-postgres/pom.xml``) are in the cache. Returns True if anything was
    downloaded."""
    if cdc_classpaths_ready(layout):
        return False
    converter_marker = layout.debezium_plugin / f".apicurio-converter-{APICURIO_CONVERTER_VERSION}"
    ensure_tools()
    _copy_dependencies(layout, layout.infra / "connect" / "pom.xml", layout.connect_lib,
                       [f"-Dkafka.version={KAFKA_VERSION}"])
    _copy_dependencies(layout, layout.infra / "connect" / "debezium-postgres" / "pom.xml", layout.debezium_plugin,
                       [f"-Ddebezium.version={DEBEZIUM_VERSION}"])
    # Apicurio's converters go into Debezium's folder (the connector's class loader loads the converter
    # its configuration names); a jar Debezium already has in another version keeps Debezium's
    staging = layout.cache / f"apicurio-converter-{APICURIO_CONVERTER_VERSION}"
    _copy_dependencies(layout, layout.infra / "connect" / "apicurio-converter" / "pom.xml", staging,
                       [f"-Dapicurio.version={APICURIO_CONVERTER_VERSION}"])
    present = {_artifact(j.name) for j in layout.debezium_plugin.glob("*.jar")}
    for jar in sorted(staging.glob("*.jar")):
        if _artifact(jar.name) not in present:
            shutil.copy2(jar, layout.debezium_plugin / jar.name)
    # Connect finds plugins through ServiceLoader manifests (plugin.discovery = service_load, no slow
    # scan), and Apicurio's converter jar has none: a jar holding only the manifest names them
    with zipfile.ZipFile(layout.debezium_plugin / "hbase-ingest-apicurio-converters.jar", "w") as manifest:
        manifest.writestr("META-INF/services/org.apache.kafka.connect.storage.Converter",
                          "".join(f"{c}\n" for c in APICURIO_CONVERTERS))
    converter_marker.write_text("ok\n")
    return True


#: the Kafka Connect converters in Apicurio's converter jar
APICURIO_CONVERTERS = ("io.apicurio.registry.utils.converter.AvroConverter",
                       "io.apicurio.registry.utils.converter.ExtJsonConverter")


def _artifact(jar_name: str) -> str:
    """``jackson-core-2.21.2.jar`` -> ``jackson-core``: the name before the first ``-<digit>``."""
    return re.split(r"-\d", jar_name.removesuffix(".jar"), maxsplit=1)[0]


def ensure_hadoop_classpath(layout: StackLayout) -> bool:
    """Make sure the NameNode's and DataNodes' classpath (``infra/hadoop/pom.xml``) is in the cache.
    Returns True if it was downloaded."""
    if (layout.hadoop_lib / ".complete").exists():
        return False
    ensure_tools()
    _copy_dependencies(layout, layout.infra / "hadoop" / "pom.xml", layout.hadoop_lib,
                       [f"-Dhadoop.version={HADOOP_VERSION}"])
    return True


#: Apicurio Registry's prebuilt server (``io.apicurio:apicurio-registry-app:<version>:tar.gz:all``) on Maven Central
APICURIO_URL = ("https://repo1.maven.org/maven2/io/apicurio/apicurio-registry-app/"
                f"{APICURIO_VERSION}/apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz")
#: its SHA-256, as Central publishes it beside the file (``.sha256``); a download that differs is refused
APICURIO_SHA256 = "2b28181501a20cbf6efcd77f9b7153908fc01f3d3a7c32024c0bd9e1b04c8a43"


def ensure_registry_dist(layout: StackLayout, url: str = APICURIO_URL, sha256: str = APICURIO_SHA256) -> bool:
    """Make sure Apicurio Registry's server is unpacked in ``layout.registry_dist``. Returns True if it
    was downloaded.

    Fetched over HTTPS rather than through Maven: Maven reads the artifact's pom before the file, and the
    pom's parent (``io.apicurio:apicurio-registry:3.0.9``) is not on Central, so Maven refuses it. The
    archive (~105 MB) is streamed to a temporary file beside the target, its SHA-256 checked against
    ``sha256``, unpacked into a temporary folder that is then renamed into place with its ``.complete``
    marker, and deleted. Raises :class:`StackError` when Central cannot be reached or the digest differs."""
    out = layout.registry_dist
    if (out / ".complete").exists():
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        archive = work / "dist.tar.gz"
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(archive, "wb") as fh:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    fh.write(chunk)
        except (urllib.error.URLError, OSError) as exc:
            raise StackError(f"downloading Apicurio Registry from Maven Central failed ({exc}): {url}\n"
                             "check network/proxy settings (https_proxy)") from exc
        if digest.hexdigest() != sha256:
            raise StackError(f"the download of {url} has SHA-256 {digest.hexdigest()}, not the expected {sha256}; "
                             "it was discarded (a proxy that rewrites downloads, or a truncated transfer?)")
        unpacked = work / "dist"
        extract_archive(archive, unpacked)
        (unpacked / ".complete").write_text("ok\n")
        if out.exists():  # an interrupted earlier unpack (no marker): redone
            shutil.rmtree(out)
        os.rename(unpacked, out)
        return True
    finally:
        shutil.rmtree(work, ignore_errors=True)


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack the ``.tar.gz`` ``archive`` into ``dest`` (created). Only folders and regular files are
    taken, at relative paths inside ``dest``; any other entry (a link, a device, an absolute path, a
    ``..``) raises :class:`StackError` and leaves ``dest`` partial for the caller to delete."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts or not (member.isdir() or member.isfile()):
                raise StackError(f"{archive.name} holds an entry that is not a plain file or folder inside it: "
                                 f"{member.name!r}")
            target = dest.joinpath(*parts) if parts else dest
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:  # a regular file always has a body
                raise StackError(f"{archive.name}: entry {member.name!r} has no content")
            with source, open(target, "wb") as fh:
                shutil.copyfileobj(source, fh)


def ensure_launcher(layout: StackLayout) -> Path | None:
    """The folder holding ``HBaseStack.class`` compiled from ``infra/HBaseStack.java``, in the cache under
    a hash of the source, compiled on first use. Every HBase JVM of the stack would otherwise compile
    the source at its start (the single-file source launcher): ~2 CPU seconds each, on the critical
    path of the one-JVM stack's start. None when ``javac`` is not on PATH or fails: the caller then
    runs the source file itself, as before."""
    source = layout.infra / "HBaseStack.java"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = layout.cache / "launcher" / digest
    if (out / "HBaseStack.class").is_file():
        return out
    javac = shutil.which("javac")
    if javac is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=out.parent))
    try:
        done = subprocess.run([javac, "-nowarn", "-cp", f"{layout.hbase_lib}/*", "-d", str(work), str(source)],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0 or not (work / "HBaseStack.class").is_file():
            return None
        try:
            os.rename(work, out)  # atomic: a concurrent `up` either sees the whole folder or none
        except OSError:
            if not (out / "HBaseStack.class").is_file():  # not a concurrent compile that won the race
                raise
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render_configs(layout: StackLayout, values: dict[str, str]) -> None:
    """Fill the ``${NAME}`` placeholders of the config templates into ``state/conf``: Kafka's
    (:func:`render_kafka_config`), then HBase's and ZooKeeper's (:func:`render_hbase_configs`)."""
    render_kafka_config(layout, values)
    render_hbase_configs(layout, values)


def render_kafka_config(layout: StackLayout, values: dict[str, str]) -> None:
    """Kafka's ``server.properties`` into ``state/conf``, and the ``log4j2.properties`` every JVM reads."""
    _render_templates(layout, values, {
        layout.infra / "conf" / "kafka" / "server.properties.in": layout.conf / "server.properties"})


def render_hbase_configs(layout: StackLayout, values: dict[str, str]) -> None:
    """``hbase-site.xml`` (into ``state/conf/hbase``) and ZooKeeper's ``zoo.cfg``, and the
    ``log4j2.properties`` every JVM reads."""
    (layout.conf / "hbase").mkdir(parents=True, exist_ok=True)
    _render_templates(layout, values, {
        layout.infra / "conf" / "hbase" / "hbase-site.xml.in": layout.conf / "hbase" / "hbase-site.xml",
        layout.infra / "conf" / "zookeeper" / "zoo.cfg.in": layout.conf / "zoo.cfg"})


def _render_templates(layout: StackLayout, values: dict[str, str], templates: dict[Path, Path]) -> None:
    layout.conf.mkdir(parents=True, exist_ok=True)
    # SECURITY: a Kerberized cluster's; ZK_HOST: ZooKeeper's address, its namespace's with [stack] netns
    values = {"STATE": str(layout.state), "SECURITY": "", "ZK_HOST": "127.0.0.1", **values}
    for src, dst in templates.items():
        try:
            text = Template(src.read_text()).substitute(values)
        except KeyError as exc:
            raise StackError(f"template {src.name} uses an unknown placeholder {exc}") from exc
        # hbase-site.xml of a Kerberized cluster names the HTTPS keystore's password (SECURITY)
        write_private(dst, text)
    shutil.copyfile(layout.infra / "conf" / "log4j2.properties", layout.conf / "log4j2.properties")


_HDFS_CONFIGS = ("core-site.xml", "hdfs-site.xml")


def render_hdfs_configs(layout: StackLayout, values: dict[str, str],
                        private: dict[str, str] | None = None) -> dict[str, str]:
    """Render ``core-site.xml`` and ``hdfs-site.xml`` into ``state/conf/hadoop`` (with the empty ``webapps``
    folders its HTTP servers need) and return them (name -> text): HBase's part puts them beside
    ``hbase-site.xml``, where the HBase JVMs find them on their classpath. ``private``: more files (name ->
    text) for ``state/conf/hadoop`` only, which hold secrets (a Kerberized HDFS's ``ssl-server.xml``): the
    folder is then its owner's only, the files 0600."""
    hadoop = layout.conf / "hadoop"
    for app in WEBAPPS:
        (hadoop / "webapps" / app).mkdir(parents=True, exist_ok=True)
    values = {"STATE": str(layout.state), "NAMENODE_HOST": "127.0.0.1", **values}
    texts: dict[str, str] = {}
    for name in _HDFS_CONFIGS:
        src = layout.infra / "conf" / "hadoop" / f"{name}.in"
        try:
            text = Template(src.read_text()).substitute(values)
        except KeyError as exc:
            raise StackError(f"template {src.name} uses an unknown placeholder {exc}") from exc
        (hadoop / name).write_text(text)
        texts[name] = text
    if private:
        hadoop.chmod(0o700)
        for name, text in private.items():
            write_private(hadoop / name, text)
    return texts
