"""The schema registry part of the local stack (``stack up --registry``), its pure pieces: settings,
process and port, the server's command line and configuration, the download's checks and unpacking,
the probe's requests (against a stand-in HTTP server), and which stack adopts a running registry."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.error import HTTPError

import pytest

from devstack import LocalStack
from devstack.launch import server_argv
from devstack.layout import APICURIO_VERSION, StackLayout, infra_dir
from devstack.provision import ensure_registry_dist, extract_archive
from devstack.registry import (
    PROBE_SUBJECT_PREFIX,
    probe_schema,
    registry_argv,
    registry_jar,
    registry_system_properties,
    registry_url,
    schema_round_trip,
)
from devstack.settings import StackSettings, load_stack_settings
from devstack.topology import plan_topology, topology_from_json
from pipeline.errors import StackError

REGISTRY = StackSettings(registry=True)


def _layout(tmp_path: Path) -> StackLayout:
    return StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())


# -- settings and topology -------------------------------------------------------------------------


def test_registry_is_off_by_default_and_set_by_file_or_environment(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s = StackSettings()
    assert not s.registry and s.registry_port == 8085 and s.registry_heap_mb == 256
    assert "registry" not in [p.name for p in plan_topology(s).processes]
    path = tmp_path / "p.toml"
    path.write_text("[stack]\nregistry = true\nregistry_port = 18085\n")
    assert load_stack_settings(path).registry_port == 18085
    monkeypatch.setenv("HBASE_INGEST_STACK__REGISTRY", "true")
    assert load_stack_settings(None).registry


def test_registry_comes_after_hbase_and_before_the_cdc_processes() -> None:
    topo = plan_topology(REGISTRY)
    assert [p.name for p in topo.processes] == ["kafka", "hbase", "registry"]
    assert topo.process("registry").ports == {"registry": 8085} and topo.process("registry").role == "registry"
    assert topology_from_json(topo.to_json()) == topo
    both = plan_topology(StackSettings(registry=True, cdc=True))
    assert [p.name for p in both.processes] == ["kafka", "hbase", "registry", "postgres", "connect"]
    cluster = plan_topology(StackSettings(registry=True, region_servers=1, gateways=1))
    assert [p.name for p in cluster.processes][-2:] == ["gateway-1", "registry"]


def test_a_registry_port_clash_is_named() -> None:
    with pytest.raises(StackError, match=r"port 9090 is assigned to both hbase thrift1 and registry"):
        plan_topology(StackSettings(registry=True, registry_port=9090))
    with pytest.raises(StackError, match=r"port 8083 is assigned to both registry and connect"):
        plan_topology(StackSettings(registry=True, cdc=True, registry_port=8083))
    plan_topology(StackSettings(registry=False, registry_port=9090))  # no registry: its port is not taken


def test_a_stack_adopts_a_registry_an_earlier_up_started(tmp_path: Path) -> None:
    state, cache = tmp_path / "state", tmp_path / "cache"
    plain = LocalStack(StackSettings(state_dir=state, cache_dir=cache))
    assert plain.registry_url is None and "registry" not in plain.procs
    state.mkdir()
    (state / "registry.pid").write_text("1 1\n")  # left by `up --registry`: this stack keeps the registry
    adopted = LocalStack(StackSettings(state_dir=state, cache_dir=cache))
    assert adopted.settings.registry and adopted.registry_url == "http://127.0.0.1:8085/apis/ccompat/v7"
    assert "registry" not in adopted.hbase_pids()
    status = adopted.status()
    assert status.ports["registry"] == 8085
    assert [(p.name, p.log) for p in status.processes if p.name == "registry"] == [
        ("registry", state / "logs" / "registry.out")]


def test_the_recorded_topology_gives_the_url_its_port(tmp_path: Path) -> None:
    settings = StackSettings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    recorded = plan_topology(StackSettings(registry=True, registry_port=18085))
    stack = LocalStack(settings, recorded)
    assert stack.settings.registry and stack.registry_url == "http://127.0.0.1:18085/apis/ccompat/v7"


# -- the server's command line -----------------------------------------------------------------------


def test_registry_runs_on_loopback_with_an_h2_file_under_the_state_folder(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    props = registry_system_properties(18085, lay)
    assert props["quarkus.http.host"] == "127.0.0.1" and props["quarkus.http.port"] == "18085"
    assert props["apicurio.storage.kind"] == "sql" and props["apicurio.storage.sql.kind"] == "h2"
    assert props["apicurio.datasource.url"] == f"jdbc:h2:file:{lay.state / 'registry' / 'db' / 'registry'}"
    assert props["quarkus.http.access-log.enabled"] == "false"
    with pytest.raises(ValueError, match="';'"):
        registry_system_properties(8085, _layout(tmp_path / "odd;dir"))


def test_registry_argv_bounds_the_heap_and_runs_the_cached_runner_jar(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    argv = registry_argv(18085, StackSettings(registry_heap_mb=320), lay)
    assert argv[0] == "java" and "-Xmx320m" in argv and "-Xms80m" in argv and "-XX:+UseSerialGC" in argv
    assert argv[-2:] == ["-jar", str(lay.cache / f"apicurio-registry-{APICURIO_VERSION}"
                                     / f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar")]
    assert argv[-1] == str(registry_jar(lay))
    assert f"-Djava.io.tmpdir={lay.state / 'registry' / 'tmp'}" in argv
    assert "-Dquarkus.http.host=127.0.0.1" in argv and "-Dquarkus.http.port=18085" in argv
    assert argv.index("-jar") > max(i for i, a in enumerate(argv) if a.startswith("-D"))  # options before -jar
    proc = plan_topology(StackSettings(registry=True, registry_port=18086)).process("registry")
    assert "-Dquarkus.http.port=18086" in server_argv(proc, REGISTRY, lay)


# -- provisioning ------------------------------------------------------------------------------------


def _tarball(path: Path, entries: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        folder = tarfile.TarInfo("lib")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            sym = tarfile.TarInfo(link)
            sym.type, sym.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(sym)
    return path


def test_extract_takes_files_and_folders_only_inside_the_target(tmp_path: Path) -> None:
    good = _tarball(tmp_path / "good.tar.gz", {"runner.jar": b"jar", "lib/a.jar": b"a"})
    extract_archive(good, tmp_path / "out")
    assert (tmp_path / "out" / "runner.jar").read_bytes() == b"jar"
    assert (tmp_path / "out" / "lib" / "a.jar").read_bytes() == b"a"
    with pytest.raises(StackError, match=r"'\.\./escape'"):
        extract_archive(_tarball(tmp_path / "up.tar.gz", {"../escape": b"x"}), tmp_path / "out2")
    assert not (tmp_path / "escape").exists()
    with pytest.raises(StackError, match="lib/link"):
        extract_archive(_tarball(tmp_path / "link.tar.gz", {}, link="lib/link"), tmp_path / "out3")


def test_the_download_is_unpacked_once_and_only_with_the_pinned_digest(tmp_path: Path) -> None:
    lay = _layout(tmp_path)
    dist = _tarball(tmp_path / "dist.tar.gz", {f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar": b"jar"})
    digest = hashlib.sha256(dist.read_bytes()).hexdigest()
    with pytest.raises(StackError, match="SHA-256"):
        ensure_registry_dist(lay, dist.as_uri(), "0" * 64)
    assert not lay.registry_dist.exists() and list(lay.cache.iterdir()) == []  # nothing half-made is left
    assert ensure_registry_dist(lay, dist.as_uri(), digest)
    assert registry_jar(lay).read_bytes() == b"jar" and (lay.registry_dist / ".complete").is_file()
    assert not ensure_registry_dist(lay, (tmp_path / "gone.tar.gz").as_uri(), digest)  # cached: not fetched
    with pytest.raises(StackError, match="Maven Central"):
        ensure_registry_dist(_layout(tmp_path / "other"), (tmp_path / "gone.tar.gz").as_uri(), digest)


# -- the readiness probe -------------------------------------------------------------------------------


class _Registry(BaseHTTPRequestHandler):
    """A stand-in for the ccompat API's three calls the probe makes; ``wrong`` serves another schema."""

    subjects: ClassVar[dict[str, str]] = {}
    calls: ClassVar[list[str]] = []
    wrong: ClassVar[bool] = False

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.calls.append(f"POST {self.path}")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["schemaType"] == "AVRO"
        self.subjects[self.path.split("/")[5]] = body["schema"]
        self._send(200, {"id": len(self.subjects)})

    def do_GET(self) -> None:
        self.calls.append(f"GET {self.path}")
        schema = list(self.subjects.values())[int(self.path.rsplit("/", 1)[1]) - 1]
        self._send(200, {"schema": probe_schema("0" * 32) if self.wrong else schema})

    def do_DELETE(self) -> None:
        self.calls.append(f"DELETE {self.path}")
        self._send(200, [1])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_registry() -> Iterator[str]:
    _Registry.subjects, _Registry.calls, _Registry.wrong = {}, [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry_url("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_probe_registers_reads_back_by_id_and_deletes_its_subject(fake_registry: str) -> None:
    assert fake_registry.endswith("/apis/ccompat/v7")
    assert schema_round_trip(fake_registry, 5.0) == 1
    subject = next(iter(_Registry.subjects))
    assert subject.startswith(PROBE_SUBJECT_PREFIX)
    assert [c.split(" ")[0] for c in _Registry.calls] == ["POST", "GET", "DELETE", "DELETE"]
    assert _Registry.calls[1] == "GET /apis/ccompat/v7/schemas/ids/1"
    assert _Registry.calls[3] == f"DELETE /apis/ccompat/v7/subjects/{subject}?permanent=true"
    schema = json.loads(_Registry.subjects[subject])
    assert schema["type"] == "record" and schema["name"] == "Ready_" + subject.removeprefix(PROBE_SUBJECT_PREFIX)


def test_probe_refuses_another_schema_and_still_deletes(fake_registry: str) -> None:
    _Registry.wrong = True
    with pytest.raises(RuntimeError, match="another schema"):
        schema_round_trip(fake_registry, 5.0)
    assert [c.split(" ")[0] for c in _Registry.calls][-2:] == ["DELETE", "DELETE"]


def test_probe_schemas_differ_per_token() -> None:
    assert probe_schema("a" * 32) != probe_schema("b" * 32)
    assert json.loads(probe_schema("a" * 32))["fields"] == [{"name": "token", "type": "string"}]


def test_probe_passes_http_errors_on(tmp_path: Path) -> None:
    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(422)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(HTTPError):
            schema_round_trip(registry_url("127.0.0.1", server.server_address[1]), 5.0)
    finally:
        server.shutdown()
        server.server_close()


def test_cli_up_offers_registry() -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "up", "--help"], capture_output=True, text=True,
                         check=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert "--registry" in out.stdout


@pytest.mark.parametrize(("jar", "artifact"), [
    ("jackson-core-2.21.2.jar", "jackson-core"), ("apicurio-registry-utils-converter-2.6.13.Final.jar",
                                                  "apicurio-registry-utils-converter"),
    ("itu-1.10.2.jar", "itu"), ("json-20240303.jar", "json"), ("zstd-jni-1.5.6-4.jar", "zstd-jni")])
def test_a_converter_jar_is_matched_to_debeziums_by_artifact_name(jar: str, artifact: str) -> None:
    from devstack.provision import _artifact
    assert _artifact(jar) == artifact
