"""Where the local stack keeps things, and which versions it runs.

- **cache** (jars, Maven repository, the Thrift2 IDL): outside the checkout so a fresh clone reuses it.
  ``$HBASE_INGEST_CACHE``, else ``$XDG_CACHE_HOME/hbase-ingest``, else ``~/.cache/hbase-ingest``.
- **state** (server data, rendered configs, logs, pid files): ``$HBASE_INGEST_STATE``, else
  ``$XDG_STATE_HOME/hbase-ingest/stack``, else ``~/.local/state/hbase-ingest/stack``.
  The CDC processes (``stack up --cdc``) keep PostgreSQL's data directory and socket folder in
  ``postgres/``, Kafka Connect's offsets file and the password file of the CDC user in ``connect/``.
  A cluster on HDFS (``stack up --hdfs``) keeps the NameNode's and DataNodes' folders in ``hdfs/``.
  The schema registry (``stack up --registry``) keeps its H2 database and temporary files in ``registry/``.
  The Kerberos part (``stack up --kerberos``) keeps its realm and keytabs in ``kerberos/``, the Kerberized
  HBase its data in ``hbase-krb/`` and its configuration in ``conf/hbase-krb/``.
- **infra** (the project's poms, config templates and the HBase launcher): ``$HBASE_INGEST_INFRA``,
  else ``infra/`` of the checkout the package runs from, else the copy an installed wheel carries
  (``devstack/infra``, mapped from ``infra/`` by pyproject.toml).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# the HBase release and the cache folder are the worker's too: its Thrift2 IDL comes from that release's
# hbase-thrift jar and is kept in that cache (connectors.hbase.thrift2_idl); the stack runs that release
from connectors.hbase.thrift2_idl import HBASE_THRIFT_VERSION, HBASE_VERSION, default_cache_dir, thrift2_idl_path

__all__ = [
    "APICURIO_CONVERTER_VERSION",
    "APICURIO_VERSION",
    "DEBEZIUM_VERSION",
    "HADOOP_VERSION",
    "HBASE_THRIFT_VERSION",
    "HBASE_VERSION",
    "KAFKA_VERSION",
    "StackLayout",
    "default_cache_dir",
    "default_state_dir",
    "infra_dir",
    "thrift2_idl_path",
    "write_private",
]

KAFKA_VERSION = "4.2.1"
#: the Hadoop of the local cluster's HDFS (``stack up --hdfs``; infra/hadoop/): HBase 2.6.1-hadoop3's own
HADOOP_VERSION = "3.3.5"
#: the Debezium PostgreSQL connector Kafka Connect runs (``stack up --cdc``; infra/connect/)
DEBEZIUM_VERSION = "3.6.1.Final"
#: the Apicurio Registry the stack runs as its schema registry (``stack up --registry``; :mod:`.registry`)
APICURIO_VERSION = "3.0.9"
#: Apicurio's Kafka Connect converters, in the Debezium plugin's folder (infra/connect/apicurio-converter/)
APICURIO_CONVERTER_VERSION = "2.6.13.Final"


def default_state_dir() -> Path:
    if env := os.environ.get("HBASE_INGEST_STATE"):
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hbase-ingest" / "stack"


def infra_dir() -> Path:
    if env := os.environ.get("HBASE_INGEST_INFRA"):
        return Path(env)
    here = Path(__file__).resolve().parent
    checkout = here.parent / "infra"
    return checkout if (checkout / "hbase" / "pom.xml").is_file() else here / "infra"


@dataclass(frozen=True)
class StackLayout:
    """Every path the stack reads or writes, derived from the cache and state roots."""

    cache: Path
    state: Path
    infra: Path

    @property
    def m2(self) -> Path:
        return self.cache / "m2"

    @property
    def kafka_lib(self) -> Path:
        return self.cache / f"kafka-{KAFKA_VERSION}" / "lib"

    @property
    def hbase_lib(self) -> Path:
        return self.cache / f"hbase-{HBASE_VERSION}" / "lib"

    @property
    def hadoop_lib(self) -> Path:
        """The NameNode's and DataNodes' classpath (``stack up --hdfs``)."""
        return self.cache / f"hadoop-{HADOOP_VERSION}" / "lib"

    @property
    def hdfs(self) -> Path:
        """HDFS's folder: ``name`` (the NameNode's), ``data-<k>`` (DataNode k's), ``tmp``."""
        return self.state / "hdfs"

    def datanode_dir(self, name: str) -> Path:
        """The data folder of DataNode ``name`` (``datanode-<k>``): ``hdfs/data-<k>``."""
        return self.hdfs / f"data-{name.rsplit('-', 1)[1]}"

    @property
    def connect_lib(self) -> Path:
        """Kafka Connect's runtime classpath (same Kafka version as the broker)."""
        return self.cache / f"connect-{KAFKA_VERSION}" / "lib"

    @property
    def connect_plugins(self) -> Path:
        """Kafka Connect's ``plugin.path``: one folder per plugin (``debezium-connector-postgres``)."""
        return self.cache / f"debezium-{DEBEZIUM_VERSION}" / "plugins"

    @property
    def debezium_plugin(self) -> Path:
        return self.connect_plugins / "debezium-connector-postgres"

    @property
    def postgres(self) -> Path:
        """PostgreSQL's folder: ``data`` (its data directory) and ``run`` (its Unix socket)."""
        return self.state / "postgres"

    @property
    def connect_state(self) -> Path:
        """Kafka Connect's folder: its offsets file, the CDC user's password, the slot record."""
        return self.state / "connect"

    @property
    def registry_dist(self) -> Path:
        """Apicurio Registry's unpacked server: ``apicurio-registry-app-<version>-runner.jar`` and ``lib/``."""
        return self.cache / f"apicurio-registry-{APICURIO_VERSION}"

    @property
    def registry_state(self) -> Path:
        """The schema registry's folder: ``db`` (its H2 database files) and ``tmp`` (its temporary files)."""
        return self.state / "registry"

    @property
    def krb_hbase(self) -> Path:
        """The Kerberized HBase's folder (``--kerberos``): ``root``, ``tmp``, ``zk``, its TLS keystore."""
        return self.state / "hbase-krb"

    @property
    def krb_hbase_conf(self) -> Path:
        """The Kerberized HBase's configuration: ``hbase-site.xml``, ``core-site.xml`` (mode 0700)."""
        return self.conf / "hbase-krb"

    @property
    def thrift2_idl(self) -> Path:
        return thrift2_idl_path(self.cache)

    @property
    def conf(self) -> Path:
        return self.state / "conf"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def lock_file(self) -> Path:
        """Held while ``up`` or ``down`` runs. Beside the state folder, not in it: ``down --wipe``
        deletes the folder while holding the lock."""
        return self.state.parent / f".{self.state.name}.lock"

    def pid_file(self, name: str) -> Path:
        return self.state / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.out"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only (0600 before a byte is written)."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def kafka_listener_rendered(layout: StackLayout, listener: str) -> bool:
    """Whether the rendered ``server.properties`` (what a running Kafka was started with) has the listener
    named ``listener`` (``SECURE``, ``SSO``, ``DISTANT``); False when nothing is rendered yet."""
    try:
        return f"{listener}://" in (layout.conf / "server.properties").read_text()
    except OSError:
        return False
