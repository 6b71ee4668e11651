"""The schema registry of the local stack (``stack up --registry``, ``[stack] registry``): Apicurio
Registry's prebuilt Quarkus server (:data:`~.layout.APICURIO_VERSION`, unpacked into the cache by
:func:`~.provision.ensure_registry_dist`), one JVM on loopback.

**API**: Confluent-compatible at :func:`registry_url` (``http://127.0.0.1:<registry_port>/apis/ccompat/v7``):
what Confluent's serializers and clients call (``POST /subjects/<subject>/versions``, ``GET
/schemas/ids/<id>``, ...); Apicurio's own API is under ``/apis/registry/v3`` of the same port. The ids
it hands out are Apicurio's content ids (``apicurio.ccompat.legacy-id-mode.enabled`` left false): one id
per distinct schema text, shared by every subject that registers it.

**Storage**: Apicurio's SQL storage on an H2 *file* database, ``<state>/registry/db/registry.mv.db``
(``apicurio.datasource.url``; the server's default is an in-memory database that a restart empties):
schemas survive a restart of the registry and ``stack down``; ``stack down --wipe`` deletes them. The
connection pool is cut to 2..10 connections (the default keeps 20 open). The log keeps the audit lines
(who registered or deleted what) and the ``io.quarkus`` logger's INFO lines, which say when the server
listens ("started in ... s. Listening on: ..."); the access log and the storage metrics' INFO lines are
off (every readiness probe would add some).

**Process** (:func:`registry_argv`): ``java -jar`` on the runner jar, heap ``registry_heap_mb`` (256; a
quarter of it at start), the serial collector, killed on OutOfMemoryError like the other JVMs, its
temporary files (Vert.x's file cache among them) in ``<state>/registry/tmp``. It needs neither Kafka
nor HBase: it starts with them and is ready in seconds.

**Readiness** (:func:`schema_round_trip`): an Avro schema unique to the probe is registered under a
subject of its own (``hbase-ingest.ready-<token>``), read back by the id the registry returned, and
compared; then the subject is deleted (soft, then permanently), so that probes leave no subjects behind.

**Part** (:class:`RegistryPart`): the above behind the stack's part interface (:mod:`.part`).
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from pipeline.errors import StackError

from .layout import APICURIO_VERSION, StackLayout
from .part import wait_for
from .processes import OwnedProcess
from .provision import ensure_registry_dist
from .settings import StackSettings
from .topology import HOST, ServerProcess

__all__ = ["CCOMPAT_PATH", "PROBE_SUBJECT_PREFIX", "RegistryPart", "probe_schema", "registry_argv", "registry_jar",
           "registry_system_properties", "registry_url", "schema_round_trip"]

#: the Confluent-compatible API's path on the registry's port
CCOMPAT_PATH = "/apis/ccompat/v7"
#: subjects of the readiness probe: this prefix and a random token (each deleted once read back)
PROBE_SUBJECT_PREFIX = "hbase-ingest.ready-"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_LOG_FORMAT = "%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p [%c{3.}] (%t) %s%e%n"


def registry_url(host: str, port: int) -> str:
    """The base URL of the Confluent-compatible API (no trailing slash)."""
    return f"http://{host}:{port}{CCOMPAT_PATH}"


def registry_jar(lay: StackLayout) -> Path:
    return lay.registry_dist / f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"


def registry_system_properties(port: int, lay: StackLayout) -> dict[str, str]:
    """The server's configuration, as ``-D`` system properties (they override its built-in
    ``application.properties``). Raises ValueError when the state folder's path has a ``;``, which
    would end the H2 URL's path and start its options."""
    db = lay.registry_state / "db" / "registry"
    if ";" in str(db):
        raise ValueError(f"the registry's database path {db} has a ';', which an H2 URL cannot hold: "
                         "move the state folder")
    tmp = lay.registry_state / "tmp"
    return {
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(port),
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "h2",
        "apicurio.datasource.url": f"jdbc:h2:file:{db}",
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "10",
        "apicurio.storage.snapshot.location": str(tmp),
        "apicurio.import.work-dir": str(tmp),
        "quarkus.http.access-log.enabled": "false",
        "quarkus.log.console.format": _LOG_FORMAT,
        'quarkus.log.category."io.quarkus".level': "INFO",
        'quarkus.log.category."io.apicurio.registry.storage.metrics".level': "WARN",
    }


def registry_argv(port: int, s: StackSettings, lay: StackLayout) -> list[str]:
    """The command that starts the registry on ``port`` (the ``registry`` process of the topology)."""
    heap = s.registry_heap_mb
    props = [f"-D{k}={v}" for k, v in registry_system_properties(port, lay).items()]
    return ["java", f"-Xms{max(64, heap // 4)}m", f"-Xmx{heap}m", "-XX:+UseSerialGC",
            "-XX:OnOutOfMemoryError=kill -9 %p", "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={lay.registry_state / 'tmp'}", *props, "-jar", str(registry_jar(lay))]


def probe_schema(token: str) -> str:
    """The probe's Avro schema: a record named after ``token`` (hex), so that its text, and therefore its
    id, is its own."""
    return json.dumps({"type": "record", "name": f"Ready_{token}", "namespace": "hbase_ingest.probe",
                       "fields": [{"name": "token", "type": "string"}]}, separators=(",", ":"))


def _call(method: str, url: str, timeout_s: float, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE})
    with urllib.request.urlopen(req, timeout=timeout_s) as response:
        return json.loads(response.read() or b"null")


def schema_round_trip(url: str, timeout_s: float = 10.0) -> int:
    """Register the probe's schema under a new probe subject at ``url`` (:func:`registry_url`), read it
    back by the returned id, then delete the subject. Returns the id. Raises the ``urllib`` exceptions
    (``HTTPError`` carries the registry's ``{"error_code", "message"}`` body; ``URLError`` when nothing
    answers), or RuntimeError when the registry returns another schema; the caller decides what they
    mean. A failed delete is ignored: the round trip itself succeeded."""
    token = uuid.uuid4().hex
    subject = urllib.parse.quote(PROBE_SUBJECT_PREFIX + token, safe="")
    schema = probe_schema(token)
    answer = _call("POST", f"{url}/subjects/{subject}/versions", timeout_s, {"schema": schema, "schemaType": "AVRO"})
    try:
        schema_id = int(answer["id"])
        got = _call("GET", f"{url}/schemas/ids/{schema_id}", timeout_s)
        if json.loads(got["schema"]) != json.loads(schema):
            raise RuntimeError(f"the registry returned another schema for id {schema_id} than the one just registered")
    finally:
        with contextlib.suppress(OSError):
            _call("DELETE", f"{url}/subjects/{subject}", timeout_s)
            _call("DELETE", f"{url}/subjects/{subject}?permanent=true", timeout_s)
    return schema_id


class RegistryPart:
    """The schema registry as a part of the stack (:class:`~.part.Part`): the ``registry`` process."""

    roles = frozenset({"registry"})

    def __init__(self, settings: StackSettings, layout: StackLayout, proc: ServerProcess,
                 process: OwnedProcess) -> None:
        self.settings = settings
        self.layout = layout
        self.port = proc.ports["registry"]
        self.process = process

    @property
    def url(self) -> str:
        """The Confluent-compatible API (:func:`registry_url`)."""
        return registry_url(HOST, self.port)

    @property
    def what(self) -> str:
        return f"the schema registry at {self.url}"

    def provisioned(self) -> bool:
        """True: its distribution is unpacked into the cache before it first starts."""
        return True

    def provision(self) -> bool:
        """Apicurio Registry's distribution into the cache (:func:`~.provision.ensure_registry_dist`)."""
        return ensure_registry_dist(self.layout)

    def render(self) -> None:
        """Nothing: the registry's configuration is its command line (:func:`registry_argv`)."""

    def start(self, proc: ServerProcess, deadline: float) -> None:
        tmp = self.layout.registry_state / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)  # java.io.tmpdir; H2 makes db/
        try:
            argv = registry_argv(proc.ports["registry"], self.settings, self.layout)
        except ValueError as exc:
            raise StackError(str(exc)) from exc
        self.process.start(argv, cwd=self.layout.registry_state)

    def wait_ready(self, deadline: float) -> None:
        wait_for(self.process, lambda: self.ready(10.0), deadline, self.settings.start_timeout_s)

    def ready(self, timeout_s: float) -> None:
        schema_round_trip(self.url, timeout_s)

    def stop(self) -> None:
        """Nothing beyond its process: the schemas stay in the state folder (``down --wipe`` deletes it)."""

    def status(self) -> list[str]:
        return [f"schema registry: {self.url} (Apicurio Registry {APICURIO_VERSION}, Confluent-compatible API; "
                f"schemas in {self.layout.registry_state / 'db'})"]
