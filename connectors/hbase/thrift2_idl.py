"""Where the HBase Thrift2 IDL comes from.

The Thrift2 interface (writes, DDL with split keys, small scan pages) is described by
:data:`IDL_MEMBER` inside HBase's ``hbase-thrift`` jar. The project carries no copy of it.
:func:`resolve_idl` returns the path of an IDL file, the first found of:

1. ``$HBASE_INGEST_THRIFT2_IDL``: an ``hbase.thrift`` file, used as it is, or a jar (for example
   the cluster's own ``lib/hbase-thrift-*.jar``). A jar's IDL is extracted once into the cache as
   ``thrift2-idl/<key>.thrift``, ``key`` being the first 16 hex digits of the SHA-256 of the jar's
   resolved path, size and modification time (ns): every process that resolves it (each scan
   worker process too) finds the copy from the jar's metadata and ``zipfile``'s look at the jar's
   end, without reading or hashing the whole jar; a jar replaced in place gets a new copy.
2. The cache's copy (``thrift2_idl_path``, written by ``hbase-ingest stack up`` or by step 3).
3. A download of ``hbase-thrift-<HBASE_THRIFT_VERSION>.jar`` from ``$HBASE_INGEST_MAVEN_REPO``
   (default: Maven Central). At most :data:`MAX_JAR_BYTES` within :data:`DOWNLOAD_TIMEOUT_S`; the jar
   is used only when its SHA-256 is the one :data:`THRIFT_JAR_SHA256` pins for that version (a
   version with no pinned hash is not downloaded at all); it stays in memory, only its IDL is kept.

So a machine that runs the worker against its own cluster needs neither the local stack nor Maven:
either network access to the repository once, or the variable pointing at a jar or IDL it has.

Files are written under a temporary name and renamed, so concurrent or interrupted resolves never
leave a partial IDL. Every failure is a :class:`~pipeline.errors.ConfigError` naming the source it
tried and how to supply the IDL: a missing IDL is a setup problem, never retried like an outage.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path

from pipeline.errors import ConfigError

__all__ = [
    "DEFAULT_MAVEN_REPO",
    "HBASE_THRIFT_VERSION",
    "HBASE_VERSION",
    "IDL_ENV",
    "IDL_MEMBER",
    "REPO_ENV",
    "THRIFT_JAR_SHA256",
    "default_cache_dir",
    "extract_idl",
    "resolve_idl",
    "thrift2_idl_path",
    "thrift_jar_url",
]

# Pinned to what Maven Central serves: hbase-thrift exists there only as 2.6.1 (see infra/hbase/pom.xml).
# The local stack (devstack) runs this release too and extracts its IDL into the same cache.
HBASE_VERSION = "2.6.1-hadoop3"
HBASE_THRIFT_VERSION = "2.6.1"

IDL_ENV = "HBASE_INGEST_THRIFT2_IDL"
REPO_ENV = "HBASE_INGEST_MAVEN_REPO"
DEFAULT_MAVEN_REPO = "https://repo1.maven.org/maven2"
IDL_MEMBER = "org/apache/hadoop/hbase/thrift2/hbase.thrift"
#: the SHA-256 of ``hbase-thrift-<version>.jar`` as Maven Central serves it, by version. Whoever
#: changes ``HBASE_THRIFT_VERSION`` adds the new jar's hash here (2.6.1: published SHA-1 b9bb4659...82e3).
THRIFT_JAR_SHA256: dict[str, str] = {
    "2.6.1": "e3f1a53ccf0e917e52c8ec02ba73dda9277422f8d0c436be2326052b201a0666",
}
MAX_JAR_BYTES = 64 << 20
DOWNLOAD_TIMEOUT_S = 120.0
_CHUNK = 1 << 16

_HOW = (f"set {IDL_ENV} to an hbase.thrift file or to your HBase's lib/hbase-thrift-*.jar, or {REPO_ENV} "
        "to a reachable Maven repository")


def default_cache_dir() -> Path:
    """The download cache (the IDL here; the local stack's jars too): ``$HBASE_INGEST_CACHE``, else
    ``$XDG_CACHE_HOME/hbase-ingest``, else ``~/.cache/hbase-ingest``."""
    if env := os.environ.get("HBASE_INGEST_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hbase-ingest"


def thrift2_idl_path(cache: Path) -> Path:
    """Where ``cache`` keeps the Thrift2 IDL (``stack up`` extracts it there; so does a download)."""
    return cache / f"hbase-{HBASE_VERSION}" / "hbase2.thrift"


def thrift_jar_url(repo: str) -> str:
    """The ``hbase-thrift`` jar's URL in a Maven repository laid out like Central."""
    name = f"hbase-thrift-{HBASE_THRIFT_VERSION}.jar"
    return f"{repo.rstrip('/')}/org/apache/hbase/hbase-thrift/{HBASE_THRIFT_VERSION}/{name}"


def _write_atomically(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is readable like the jars around it
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def extract_idl(jar: Path | bytes, dest: Path, *, source: str | None = None) -> Path:
    """Write the :data:`IDL_MEMBER` of ``jar`` (a path, or the jar's bytes) to ``dest`` (atomically)
    and return ``dest``. ``source`` names the jar's origin in errors (default: its path)."""
    where = source or str(jar if isinstance(jar, Path) else "the downloaded jar")
    try:
        with zipfile.ZipFile(jar if isinstance(jar, Path) else io.BytesIO(jar)) as zf:
            data = zf.read(IDL_MEMBER)
    except KeyError:
        raise ConfigError(f"{where} has no {IDL_MEMBER}: it is not HBase's hbase-thrift jar") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read the jar {where}: {exc}") from exc
    try:
        _write_atomically(dest, data)
    except OSError as exc:
        raise ConfigError(f"cannot write the Thrift2 IDL to {dest}: {exc}") from exc
    return dest


def _from_env(value: str, cache: Path) -> Path:
    path = Path(value).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise ConfigError(f"{IDL_ENV}={value}: {what} (give an hbase.thrift file or an hbase-thrift jar)")
    if not zipfile.is_zipfile(path):
        return path
    try:
        st = path.stat()
        identity = f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    except OSError as exc:
        raise ConfigError(f"{IDL_ENV}={value}: cannot read it: {exc}") from exc
    dest = cache / "thrift2-idl" / f"{hashlib.sha256(identity.encode()).hexdigest()[:16]}.thrift"
    if dest.is_file():
        return dest
    return extract_idl(path, dest, source=f"{IDL_ENV}={value}")


def _download(url: str, *, expect_sha256: str, max_bytes: int, timeout_s: float) -> bytes:
    """``url``'s body, at most ``max_bytes`` within ``timeout_s``, whose SHA-256 must be ``expect_sha256``."""
    deadline = time.monotonic() + timeout_s
    digest, got = hashlib.sha256(), 0
    chunks: list[bytes] = []
    try:
        with urllib.request.urlopen(url, timeout=min(timeout_s, 30.0)) as resp:
            while chunk := resp.read(_CHUNK):
                got += len(chunk)
                if got > max_bytes:
                    raise ConfigError(f"downloading {url} stopped: more than {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise ConfigError(f"downloading {url} stopped: not done within {timeout_s:.0f} s")
                digest.update(chunk)
                chunks.append(chunk)
    except (OSError, urllib.error.URLError, ValueError) as exc:  # ValueError: a malformed URL
        raise ConfigError(f"downloading {url} failed: {exc}") from exc
    if digest.hexdigest() != expect_sha256:
        raise ConfigError(f"downloading {url} gave bytes whose SHA-256 is {digest.hexdigest()}, not the expected "
                          f"{expect_sha256} (a proxy or mirror served something else)")
    return b"".join(chunks)


def _pinned_sha256() -> str:
    try:
        return THRIFT_JAR_SHA256[HBASE_THRIFT_VERSION]
    except KeyError:
        raise ConfigError(f"no SHA-256 is pinned for hbase-thrift {HBASE_THRIFT_VERSION} (THRIFT_JAR_SHA256 in "
                          f"{__name__}), so it is not downloaded") from None


def resolve_idl(env: Mapping[str, str] | None = None, cache: Path | None = None) -> Path:
    """The path of a Thrift2 IDL file, from the first source that has one (module docstring).
    ``env`` defaults to ``os.environ``, ``cache`` to :func:`default_cache_dir`."""
    env = os.environ if env is None else env
    cache = default_cache_dir() if cache is None else cache
    if value := env.get(IDL_ENV):
        return _from_env(value, cache)
    cached = thrift2_idl_path(cache)
    if cached.is_file():
        return cached
    url = thrift_jar_url(env.get(REPO_ENV) or DEFAULT_MAVEN_REPO)
    try:
        jar = _download(url, expect_sha256=_pinned_sha256(), max_bytes=MAX_JAR_BYTES, timeout_s=DOWNLOAD_TIMEOUT_S)
    except ConfigError as exc:
        raise ConfigError(f"the HBase Thrift2 IDL is not in the cache ({cached}), and {exc}; {_HOW}") from exc
    return extract_idl(jar, cached, source=url)
