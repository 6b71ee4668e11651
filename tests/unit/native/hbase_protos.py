"""HBase's own protobuf messages as Python classes, generated at test time from the ``.proto`` files of the
HBase the local stack runs: ``hbase-protocol-shaded-<version>.jar`` (package ``hbase.pb``, proto2) holds
them. The jar is looked for where ``hbase-ingest stack up`` puts it (:class:`~devstack.layout.StackLayout`:
the HBase classpath ``hbase_lib``, else the stack's Maven repository ``m2``); nothing of it is kept in the
repository. The ``.proto`` files the messages need (and those they import, followed from their ``import``
lines) are extracted to a temporary folder and compiled with ``protoc`` (``grpcio-tools``, run in this
process, ``--python_out``); the generated modules are imported from there once per process.

``grpcio-tools`` requires a ``protobuf`` runtime at least as new as its ``protoc`` (its own dependency), so
the generated code's version check (``runtime_version.ValidateProtobufRuntimeVersion``) holds with whatever
pip installs together.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devstack.layout import HBASE_VERSION, StackLayout, default_cache_dir, default_state_dir, infra_dir

__all__ = ["JAR", "HBaseProtos", "find_jar", "hbase_protos", "protos_or_skip"]

JAR = f"hbase-protocol-shaded-{HBASE_VERSION}.jar"
#: the files whose messages the native client writes or reads (their imports come along)
_ROOTS = ("RPC.proto", "Client.proto", "HBase.proto", "Registry.proto")
_IMPORT = re.compile(rb'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)


@dataclass(frozen=True)
class HBaseProtos:
    """The generated modules (``RPC_pb2``, ``Client_pb2``, ``HBase_pb2``, ``Registry_pb2``): untyped, as
    generated code is; each message class is an attribute (``protos.client.MultiRequest``)."""

    jar: Path
    rpc: Any
    client: Any
    hbase: Any
    registry: Any


def find_jar() -> Path | None:
    """The shaded protocol jar of the stack's HBase (:data:`JAR`), or None when the stack was never
    provisioned on this machine."""
    layout = StackLayout(default_cache_dir(), default_state_dir(), infra_dir())
    for path in (layout.hbase_lib / JAR, layout.m2 / "org/apache/hbase/hbase-protocol-shaded" / HBASE_VERSION / JAR):
        if path.is_file():
            return path
    return None


def _extract(jar: Path, dest: Path) -> list[str]:
    """Write :data:`_ROOTS` and every file they import, transitively, into ``dest``; their names."""
    with zipfile.ZipFile(jar) as zf:
        members = {Path(n).name: n for n in zf.namelist() if n.endswith(".proto")}
        wanted, seen = list(_ROOTS), set[str]()
        while wanted:
            name = wanted.pop()
            if name in seen:
                continue
            if name not in members:
                raise FileNotFoundError(f"{jar.name} holds no {name}")
            seen.add(name)
            text = zf.read(members[name])
            (dest / name).write_bytes(text)
            wanted += [m.decode() for m in _IMPORT.findall(text)]
    return sorted(seen)


@functools.cache
def hbase_protos(jar: Path) -> HBaseProtos:
    """The modules generated from ``jar``'s ``.proto`` files (once per process). Raises ``RuntimeError``
    when ``protoc`` refuses them (its messages are on stderr)."""
    from grpc_tools import protoc  # loads protoc's native code: only when the messages are wanted

    with tempfile.TemporaryDirectory(prefix="hbase-protos-") as tmp:
        root = Path(tmp)
        names = _extract(jar, root)
        code = protoc.main(["protoc", f"-I{root}", f"--python_out={root}", *names])
        if code != 0:
            raise RuntimeError(f"protoc could not compile {', '.join(names)} of {jar.name} (exit {code})")
        # the generated modules import each other by their top-level names (``import HBase_pb2``)
        sys.path.insert(0, tmp)
        try:
            mods = {n: importlib.import_module(f"{n.removesuffix('.proto')}_pb2") for n in _ROOTS}
        finally:
            sys.path.remove(tmp)
    return HBaseProtos(jar, mods["RPC.proto"], mods["Client.proto"], mods["HBase.proto"], mods["Registry.proto"])


def protos_or_skip() -> HBaseProtos:
    """:func:`hbase_protos` of the stack's jar; the calling test is skipped when there is none."""
    jar = find_jar()
    if jar is None:
        pytest.skip(f"{JAR} is not in the stack's cache: `hbase-ingest stack up` downloads it "
                    "(or set HBASE_INGEST_CACHE to a cache that holds it)")
    return hbase_protos(jar)
