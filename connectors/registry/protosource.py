"""Protobuf schemas a registry holds as ``.proto`` source, compiled to serialized descriptors.

A registry returns a Protobuf schema either as a base64 ``FileDescriptorProto`` (Confluent's registry with
``?format=serialized``, or a schema that Confluent's Python serializer registered) or as the ``.proto``
source it was registered with (Apicurio's Confluent-compatible API always; Java serializers register
source). :func:`serialized` turns the source into what :mod:`pipeline.core.records.protobufs` compiles, with
``protoc`` itself (``grpcio-tools``, run in this process on files in a temporary folder): the schema
and its references (each written under its reference name, the path its ``import`` uses), with the
well-known ``google/protobuf/*.proto`` files ``grpcio-tools`` ships.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2

from pipeline.core.records.schemas import SchemaReference

__all__ = ["is_serialized", "serialized"]

_MAIN = "registry_schema.proto"


def is_serialized(text: str) -> bool:
    """Whether ``text`` is a base64 serialized ``FileDescriptorProto`` (not ``.proto`` source)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        descriptor_pb2.FileDescriptorProto().ParseFromString(raw)
    except (binascii.Error, UnicodeEncodeError, ValueError, Exception):  # DecodeError derives from Exception
        return False
    return True


def serialized(text: str, references: tuple[SchemaReference, ...]) -> tuple[str, tuple[SchemaReference, ...]]:
    """``text`` and ``references`` (``.proto`` sources) as base64 ``FileDescriptorProto``\\ s, the
    references' names kept; ``ValueError`` with protoc's messages when they do not compile."""
    from grpc_tools import protoc  # imported when a source schema is met: it loads protoc's native code

    with tempfile.TemporaryDirectory(prefix="hbase-ingest-proto-") as tmp:
        root = Path(tmp)
        for ref in references:
            path = root / ref.name
            if not path.resolve().is_relative_to(root.resolve()):
                raise ValueError(f"reference name {ref.name!r} is not a relative .proto path")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ref.text)
        (root / _MAIN).write_text(text)
        out = root / "descriptors.pb"
        well_known = str(resources.files("grpc_tools") / "_proto")
        errors = root / "protoc.err"
        code = _run(protoc, ["protoc", f"-I{root}", f"-I{well_known}", "--include_imports",
                             f"--descriptor_set_out={out}", _MAIN], errors)
        if code != 0:
            raise ValueError(f"protoc could not compile the schema: {errors.read_text().strip() or f'exit {code}'}")
        files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file}

    def b64(name: str) -> str:
        return base64.b64encode(files[name].SerializeToString()).decode()
    return b64(_MAIN), tuple(SchemaReference(r.name, b64(r.name), r.subject, r.version) for r in references
                             if r.name in files)


def _run(protoc: object, argv: list[str], errors: Path) -> int:
    """protoc's main, its stderr (file descriptor 2) captured into ``errors``."""
    import os

    saved = os.dup(2)
    with errors.open("wb") as err:
        os.dup2(err.fileno(), 2)
        try:
            return int(protoc.main(argv))  # type: ignore[attr-defined]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
