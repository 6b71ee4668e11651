"""The registry client against scripted HTTP answers (httpx's mock transport): what it asks, how it
reads Confluent's answers, and which error each failure becomes. The real registry is in
tests/integration/test_registry*.py."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors.registry import RegistryClient, open_registry
from pipeline.core.records.schemas import SchemaCache, registry_decoder
from pipeline.core.records.wire import frame
from pipeline.errors import ConfigError, EventError, RegistryError, RegistryUnavailable, SchemaNotFound
from pipeline.settings import RegistrySettings, load_settings

URL = "http://registry.test:8085/apis/ccompat/v7"
AVRO = '{"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}]}'


def _client(handler: Callable[[httpx.Request], httpx.Response], **settings: object) -> RegistryClient:
    return RegistryClient(RegistrySettings(url=URL, **settings), transport=httpx.MockTransport(handler))


async def test_schema_by_id_with_references_resolved_dependencies_first() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.url.path}?{request.url.query.decode()}")
        path = request.url.path.removeprefix("/apis/ccompat/v7")
        answers = {
            "/schemas/ids/12": {"schema": AVRO, "references": [{"name": "b.B", "subject": "b", "version": 2},
                                                                {"name": "a.A", "subject": "a", "version": 1}]},
            "/subjects/b/versions/2": {"schema": "B", "references": [{"name": "a.A", "subject": "a", "version": 1}]},
            "/subjects/a/versions/1": {"schema": "A"},
        }
        return httpx.Response(200, json=answers[path])

    schema = await _client(handler).schema(12)
    assert schema.id == 12 and schema.schema_type == "AVRO" and schema.text == AVRO  # schemaType absent: Avro
    assert [(r.name, r.text) for r in schema.references] == [("a.A", "A"), ("b.B", "B")]
    assert asked[0] == "/apis/ccompat/v7/schemas/ids/12?format=serialized"
    assert asked.count("/apis/ccompat/v7/subjects/a/versions/1?format=serialized") == 1  # each once


async def test_not_found_is_schema_not_found_with_the_registrys_words() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error_code": 40403, "message": "Schema 77 not found"})
    with pytest.raises(SchemaNotFound, match=r"schema id 77: not found \(Schema 77 not found, error 40403\)") as info:
        await _client(handler).schema(77)
    assert info.value.schema_id == 77 and not info.value.retryable


@pytest.mark.parametrize(("answer", "error", "retryable"), [
    (httpx.Response(503, text="down"), "HTTP 503", True),
    (httpx.Response(429, json={"message": "slow down"}), "HTTP 429", True),
    (httpx.Response(401, json={"message": "Unauthorized", "error_code": 401}), "credentials were refused", False),
    (httpx.Response(200, json={"nothing": 1}), "holds no schema text", False),
    (httpx.Response(200, json={"schema": "x", "schemaType": "XML"}), "schemaType 'XML'", False),
])
async def test_answers_become_our_errors(answer: httpx.Response, error: str, retryable: bool) -> None:
    with pytest.raises(RegistryError, match=error) as info:
        await _client(lambda _: answer).schema(1)
    assert info.value.retryable is retryable


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
async def test_no_answer_is_unavailable(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc
    with pytest.raises(RegistryUnavailable, match=f"registry {URL}: (fetching schema id 1|listing subjects)"):
        await _client(handler).schema(1)
    with pytest.raises(RegistryUnavailable):
        await _client(handler).check()


async def test_basic_auth_is_sent_and_the_password_never_appears(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(401, json={"message": "nope"})
    secret = tmp_path / "pw"
    secret.write_text("s3cret-pw\n")
    client = _client(handler, username="ingest", password_file=secret)
    with pytest.raises(RegistryError) as info:
        await client.schema(1)
    assert seen == ["Basic aW5nZXN0OnMzY3JldC1wdw=="]  # ingest:s3cret-pw
    assert "s3cret" not in str(info.value) and "s3cret" not in repr(client)
    assert "s3cret" not in repr(RegistrySettings(url=URL, username="u", password="s3cret-pw"))


def test_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="password without a username"):
        RegistrySettings(url=URL, password="x")
    with pytest.raises(ValueError, match="String should match pattern"):
        RegistrySettings(url="http://user:pw@host/x")  # credentials never in the URL
    with pytest.raises(ConfigError, match=r"topic 'orders' \(value_format 'avro'\) reads writer schemas from a schema "
                                          r"registry: set \[registry\] url"):
        load_settings(None, topics=[{"name": "orders", "value_format": "avro"}])


async def test_open_registry_only_when_a_topic_needs_one() -> None:
    async with open_registry(load_settings(None)) as none:
        assert none is None
    settings = load_settings(None, topics=[{"name": "o", "value_format": "protobuf"}], registry={"url": URL})
    async with open_registry(settings) as client:
        assert client is not None and client.url == URL


async def test_protobuf_source_is_compiled_with_its_imports() -> None:
    """Apicurio keeps .proto source and returns it as registered: the client compiles it (and its
    references, under their import names) into descriptors the Protobuf decoder reads."""
    common = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
    order = ('syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\n'
             'import "google/protobuf/timestamp.proto";\n'
             "message Order { string id = 1; shop.Money total = 2; google.protobuf.Timestamp at = 3; }\n")
    answers = {"/schemas/ids/5": {"schema": order, "schemaType": "PROTOBUF",
                                  "references": [{"name": "shop/money.proto", "subject": "money", "version": 1}]},
               "/subjects/money/versions/1": {"schema": common, "schemaType": "PROTOBUF"},
               "/schemas/ids/6": {"schema": 'syntax = "proto3"; message Broken { nope x = 1; }',
                                  "schemaType": "PROTOBUF"}}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answers[request.url.path.removeprefix("/apis/ccompat/v7")])
    client = _client(handler)
    schema = await client.schema(5)
    assert schema.problem is None and [r.name for r in schema.references] == ["shop/money.proto"]
    cache = SchemaCache()
    assert cache.add(schema).problem is None
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for text in (schema.references[0].text, schema.text):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text)))
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    msg: Any = cls(id="o1")
    msg.total.cents, msg.at.seconds = 1250, 1_700_000_000
    assert registry_decoder("protobuf", cache, "value")(frame(5, msg.SerializeToString(), [0])) == {
        "id": "o1", "total": {"cents": 1250, "currency": ""}, "at": 1_700_000_000_000}
    broken = await client.schema(6)
    assert broken.problem is not None and "protoc could not compile the schema" in broken.problem
    cache.add(broken)
    with pytest.raises(EventError, match=r"cannot be used: \.proto source that does not compile") as info:
        registry_decoder("protobuf", cache, "value")(frame(6, b"", [0]))
    assert info.value.reason == "unknown_schema"
