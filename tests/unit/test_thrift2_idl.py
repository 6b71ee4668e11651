"""Where the Thrift2 IDL comes from (connectors.hbase.thrift2_idl): the variable (file or jar), the
cache, a checked download; every failure is a ConfigError that says how to supply it. No servers:
the Maven repository is a loopback stand-in."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
from pathlib import Path

import pytest

from connectors.hbase import thrift2_idl
from connectors.hbase.thrift2 import parse_idl
from connectors.hbase.thrift2_idl import (
    HBASE_THRIFT_VERSION,
    IDL_ENV,
    IDL_MEMBER,
    REPO_ENV,
    extract_idl,
    resolve_idl,
    thrift_jar_url,
)
from pipeline.errors import ConfigError, HBaseError
from tests.file_server import serve_files

IDL = b"namespace java t\nservice THBaseService {\n  bool exists(1: binary table)\n}\n"


def jar_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def cached_idl(cache: Path) -> Path:
    return next(cache.glob("hbase-*/hbase2.thrift"))


# the jar's path on the stand-in repository (serve_files' base URL ends in /maven2)
JAR_PATH = "/maven2" + thrift_jar_url("")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_variable_naming_an_idl_file_is_used_as_it_is(tmp_path: Path, cache: Path) -> None:
    idl = tmp_path / "hbase.thrift"
    idl.write_bytes(IDL)
    assert resolve_idl({IDL_ENV: str(idl)}, cache) == idl
    assert not cache.exists()  # nothing copied, nothing downloaded


def test_variable_naming_a_jar_extracts_its_idl_once(tmp_path: Path, cache: Path) -> None:
    jar = tmp_path / "hbase-thrift-2.5.8.jar"
    jar.write_bytes(jar_bytes({IDL_MEMBER: IDL, "META-INF/MANIFEST.MF": b"x"}))
    got = resolve_idl({IDL_ENV: str(jar)}, cache)
    assert got.read_bytes() == IDL and got.parent == cache / "thrift2-idl"
    assert got.stat().st_mode & 0o777 == 0o644
    stamp = got.stat().st_mtime_ns
    os.utime(got, ns=(stamp - 10**9, stamp - 10**9))
    assert resolve_idl({IDL_ENV: str(jar)}, cache) == got
    assert got.stat().st_mtime_ns == stamp - 10**9  # the second call reused the extracted copy
    assert [p.name for p in got.parent.iterdir()] == [got.name]  # no temporary file left


def test_a_jar_replaced_in_place_gets_its_own_copy(tmp_path: Path, cache: Path) -> None:
    jar = tmp_path / "hbase-thrift.jar"
    jar.write_bytes(jar_bytes({IDL_MEMBER: IDL}))
    first = resolve_idl({IDL_ENV: str(jar)}, cache)
    newer = IDL + b"\n// a later HBase\n"
    jar.write_bytes(jar_bytes({IDL_MEMBER: newer}))
    stamp = jar.stat().st_mtime_ns
    os.utime(jar, ns=(stamp + 10**9, stamp + 10**9))  # a coarse clock could give both the same mtime
    second = resolve_idl({IDL_ENV: str(jar)}, cache)
    assert second != first and second.read_bytes() == newer and first.read_bytes() == IDL
    copy = tmp_path / "copy-of-it.jar"  # the same jar elsewhere: a copy of its own
    copy.write_bytes(jar.read_bytes())
    assert resolve_idl({IDL_ENV: str(copy)}, cache) not in (first, second)


def test_variable_naming_another_jar_or_nothing_is_a_config_error(tmp_path: Path, cache: Path) -> None:
    other = tmp_path / "hbase-server.jar"
    other.write_bytes(jar_bytes({"org/apache/hadoop/hbase/Foo.class": b"\xca\xfe"}))
    with pytest.raises(ConfigError, match=r"has no org/apache/hadoop/hbase/thrift2/hbase.thrift: it is not HBase's "
                                          r"hbase-thrift jar") as info:
        resolve_idl({IDL_ENV: str(other)}, cache)
    assert IDL_ENV in str(info.value)
    with pytest.raises(ConfigError, match=rf"{IDL_ENV}=.*missing.thrift: no such file"):
        resolve_idl({IDL_ENV: str(tmp_path / "missing.thrift")}, cache)
    with pytest.raises(ConfigError, match=rf"{IDL_ENV}=.*: is a directory"):
        resolve_idl({IDL_ENV: str(tmp_path)}, cache)


def test_the_cached_copy_needs_no_network(cache: Path) -> None:
    with serve_files({}) as (base, requested):
        # seed the cache the way `stack up` does, then resolve with a repository that has nothing
        dest = cache / "hbase-2.6.1-hadoop3" / "hbase2.thrift"
        extract_idl(jar_bytes({IDL_MEMBER: IDL}), dest)
        assert resolve_idl({REPO_ENV: base}, cache) == dest
        assert requested == []


def test_download_is_checked_and_only_the_idl_is_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = jar_bytes({IDL_MEMBER: IDL})
    monkeypatch.setitem(thrift2_idl.THRIFT_JAR_SHA256, HBASE_THRIFT_VERSION, hashlib.sha256(jar).hexdigest())
    with serve_files({JAR_PATH: jar}) as (base, requested):
        got = resolve_idl({REPO_ENV: base}, cache)
        assert requested == [JAR_PATH]
        assert got == cached_idl(cache) and got.read_bytes() == IDL
        assert [p.name for p in got.parent.iterdir()] == ["hbase2.thrift"]  # no jar, no temporary file
        assert resolve_idl({REPO_ENV: base}, cache) == got and len(requested) == 1


def test_download_with_other_bytes_is_refused_and_nothing_is_written(cache: Path) -> None:
    with serve_files({JAR_PATH: jar_bytes({IDL_MEMBER: IDL})}) as (base, _), \
            pytest.raises(ConfigError, match=r"SHA-256 is [0-9a-f]{64}, not the expected e3f1a53c") as info:
        resolve_idl({REPO_ENV: base}, cache)
    assert IDL_ENV in str(info.value) and REPO_ENV in str(info.value)
    assert not list(cache.rglob("*")) or all(p.is_dir() for p in cache.rglob("*"))


def test_the_stacks_thrift_version_has_a_pinned_hash_and_an_unpinned_one_is_never_fetched(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert HBASE_THRIFT_VERSION in thrift2_idl.THRIFT_JAR_SHA256  # a version bump adds its jar's hash
    monkeypatch.delitem(thrift2_idl.THRIFT_JAR_SHA256, HBASE_THRIFT_VERSION)
    with serve_files({JAR_PATH: jar_bytes({IDL_MEMBER: IDL})}) as (base, requested), \
            pytest.raises(ConfigError, match=rf"no SHA-256 is pinned for hbase-thrift {HBASE_THRIFT_VERSION}") as info:
        resolve_idl({REPO_ENV: base}, cache)
    assert requested == [] and IDL_ENV in str(info.value)


def test_download_failures_name_the_url_and_how_to_supply_the_idl(cache: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_files({}) as (base, _), pytest.raises(ConfigError, match=r"HTTP Error 404") as info:
        resolve_idl({REPO_ENV: base}, cache)
    text = str(info.value)
    assert thrift_jar_url(base) in text and "is not in the cache" in text
    assert IDL_ENV in text and REPO_ENV in text
    assert not isinstance(info.value, HBaseError)  # a setup problem, not an outage to retry
    with pytest.raises(ConfigError, match=r"Connection refused"):
        resolve_idl({REPO_ENV: "http://127.0.0.1:1/maven2"}, cache)
    jar = jar_bytes({IDL_MEMBER: IDL * 100})
    monkeypatch.setattr(thrift2_idl, "MAX_JAR_BYTES", 1000)
    monkeypatch.setattr(thrift2_idl, "_CHUNK", 256)
    with serve_files({JAR_PATH: jar}) as (base, _), pytest.raises(ConfigError, match="more than 1000 bytes"):
        resolve_idl({REPO_ENV: base}, cache)


def test_an_idl_that_does_not_parse_or_is_not_hbases_is_named(tmp_path: Path, unique: str) -> None:
    # modules under names of their own: the real IDL's name ("hbase2_thrift") stays untouched
    names = [f"idl_{unique}_{i}_thrift" for i in range(3)]
    try:
        bad = tmp_path / "bad.thrift"
        bad.write_text("service {")
        with pytest.raises(ConfigError, match=r"bad.thrift does not parse"):
            parse_idl(bad, names[0])
        other = tmp_path / "other.thrift"
        other.write_text("service Other {\n  bool ping()\n}\n")
        with pytest.raises(ConfigError, match=r"other.thrift defines no THBaseService"):
            parse_idl(other, names[1])
        good = tmp_path / "good.thrift"
        good.write_bytes(IDL)
        assert hasattr(parse_idl(good, names[2]), "THBaseService")
    finally:
        for name in names:
            sys.modules.pop(name, None)
