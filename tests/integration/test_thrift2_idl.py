"""A machine that never ran `stack up` (empty cache) against real servers: the Thrift2 IDL is
downloaded once and checked, and writes work; with no way to get it, the worker stops at start with
the reason instead of retrying its writes as if HBase were down."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from connectors.hbase.thrift2_idl import thrift_jar_url
from devstack import HBASE_THRIFT_VERSION, LocalStack
from tests.file_server import serve_files

ROOT = Path(__file__).resolve().parents[2]

WRITE_AND_READ = textwrap.dedent("""
    import sys, anyio
    from connectors.hbase import HBaseClient
    from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
    from pipeline.settings import FamilySpec, HBaseSettings

    async def main(table: str, port: int, port2: int) -> None:
        async with HBaseClient(HBaseSettings(port=port, thrift2_port=port2)) as hb:
            await hb.create_table(table, {"d": FamilySpec()}, [b"m"])  # Thrift2 DDL with a split key
            try:
                origin = Origin(TopicPartition("t", 0), 0)
                await hb.write(table, [Mutation(table, b"k%d" % i, MutationKind.PUT, {b"d:v": b"%d" % i}, 1000 + i,
                                                origin) for i in range(20)])
                print(await hb.count(table), (await hb.get(table, b"k7"))[b"d:v"].decode())
            finally:
                await hb.delete_table(table)

    anyio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
""")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HBASE_INGEST_THRIFT2_IDL", "HBASE_INGEST_MAVEN_REPO")}
    return {**env, "HBASE_INGEST_CACHE": str(cache), "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **extra}


def test_an_empty_cache_downloads_the_idl_once_and_writes(stack: LocalStack, tmp_path: Path, unique: str) -> None:
    jar = (stack.layout.hbase_lib / f"hbase-thrift-{HBASE_THRIFT_VERSION}.jar").read_bytes()
    path = "/maven2" + thrift_jar_url("")  # serve_files' base URL ends in /maven2
    cache = tmp_path / "cache"
    s = stack.settings
    with serve_files({path: jar}) as (base, requested):
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", WRITE_AND_READ, f"t_idl_{unique}", str(s.thrift_port),
                                  str(s.thrift2_port)], env=_env(cache, HBASE_INGEST_MAVEN_REPO=base),
                                 capture_output=True, text=True, timeout=120, check=False)
            assert out.returncode == 0, out.stderr[-3000:]
            assert out.stdout.split() == ["20", "7"]
    assert requested == [path]  # the second process found the IDL in the cache
    assert (next(cache.glob("hbase-*/hbase2.thrift")).read_bytes()
            == stack.layout.thrift2_idl.read_bytes())


def test_worker_without_any_idl_stops_at_start_naming_the_fix(stack: LocalStack, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(ROOT / "config" / "logs.toml"),
                          "--group", f"idl-{tmp_path.name}"],
                         env=_env(tmp_path / "cache", HBASE_INGEST_MAVEN_REPO="http://127.0.0.1:1/maven2"),
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    err = " ".join(out.stderr.split())
    assert "the HBase Thrift2 IDL is not in the cache" in err and "Connection refused" in err
    assert "HBASE_INGEST_THRIFT2_IDL" in err and "batch_retry" not in out.stdout + out.stderr
