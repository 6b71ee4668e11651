"""The schema registry of the local stack (``stack up --registry``): Apicurio Registry answers the
Confluent-compatible API at ``LocalStack.registry_url``, keeps schemas across a restart of its process,
and ``stack status`` shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from typing import Any

from devstack import LocalStack
from devstack.registry import PROBE_SUBJECT_PREFIX

_JSON = "application/vnd.schemaregistry.v1+json"


def _url(stack: LocalStack) -> str:
    url = stack.registry_url
    assert url is not None
    return url


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None, method=method,
                                 headers={"Content-Type": _JSON, "Accept": _JSON})
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.loads(response.read())


def _schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "hbase_ingest.test",
                       "fields": [{"name": "order_id", "type": "long"}, {"name": "status", "type": "string"}]})


def _register(url: str, subject: str, schema: str) -> int:
    return int(_call("POST", f"{url}/subjects/{urllib.parse.quote(subject, safe='')}/versions",
                     {"schema": schema, "schemaType": "AVRO"})["id"])


def _delete(url: str, subject: str) -> None:
    quoted = urllib.parse.quote(subject, safe="")
    _call("DELETE", f"{url}/subjects/{quoted}")
    _call("DELETE", f"{url}/subjects/{quoted}?permanent=true")


def test_registry_url_answers_on_loopback(registry_stack: LocalStack) -> None:
    url = _url(registry_stack)
    assert url == f"http://127.0.0.1:{registry_stack.settings.registry_port}/apis/ccompat/v7"
    subjects = _call("GET", f"{url}/subjects")
    assert isinstance(subjects, list)
    assert not [s for s in subjects if s.startswith(PROBE_SUBJECT_PREFIX)]  # the probes delete theirs


def test_a_schema_is_registered_and_looked_up_by_id(registry_stack: LocalStack, unique: str) -> None:
    url = _url(registry_stack)
    subject, schema = f"orders-{unique}-value", _schema(f"Order_{unique}")
    schema_id = _register(url, subject, schema)
    try:
        assert json.loads(_call("GET", f"{url}/schemas/ids/{schema_id}")["schema"]) == json.loads(schema)
        latest = _call("GET", f"{url}/subjects/{subject}/versions/latest")
        assert latest["id"] == schema_id and latest["version"] == 1 and latest["subject"] == subject
        assert _register(url, subject, schema) == schema_id  # the same text again: the same id, no new version
        assert _call("GET", f"{url}/subjects/{subject}/versions") == [1]
    finally:
        _delete(url, subject)


def test_status_lists_the_registry(registry_stack: LocalStack) -> None:
    proc = next(p for p in registry_stack.status().processes if p.name == "registry")
    port = registry_stack.settings.registry_port
    assert proc.state == "running" and proc.pid and proc.rss_mb and proc.rss_mb > 50
    assert proc.ports == {"registry": port} and proc.log.exists()
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "status"], capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "COLUMNS": "250"}).stdout
    flat = out.replace("\n", " ")
    assert "registry " in out and str(proc.pid) in out and str(proc.log) in flat and f"registry {port}" in out
    assert f"schema registry: {_url(registry_stack)}" in flat
    assert "ready" in out and "schema registry" in out


def test_second_up_reuses_the_registry(registry_stack: LocalStack) -> None:
    pid = registry_stack.procs["registry"].pid()
    report = LocalStack(registry_stack.settings).up()
    assert report.reused and registry_stack.procs["registry"].pid() == pid
    # an `up` without --registry keeps it as part of the stack
    plain = LocalStack(registry_stack.settings.model_copy(update={"registry": False}))
    assert plain.registry_url == registry_stack.registry_url and "registry" in plain.procs


def test_schemas_survive_a_restart_of_the_registry(registry_stack: LocalStack, unique: str) -> None:
    url = _url(registry_stack)
    subject, schema = f"kept-{unique}-value", _schema(f"Kept_{unique}")
    schema_id = _register(url, subject, schema)
    registry = registry_stack.procs["registry"]
    old = registry.pid()
    try:
        assert registry.stop()
        report = LocalStack(registry_stack.settings).up()  # starts only the registry again
        assert not report.reused and registry.pid() not in (None, old)
        assert json.loads(_call("GET", f"{url}/schemas/ids/{schema_id}")["schema"]) == json.loads(schema)
        assert _call("GET", f"{url}/subjects/{subject}/versions/latest")["id"] == schema_id
    finally:
        _delete(url, subject)
