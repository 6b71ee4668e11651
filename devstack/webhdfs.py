"""A minimal WebHDFS client for the local cluster's HDFS (``stack up --hdfs``): the readiness round
trip, and reading files back (tests copy HBase's WAL files out with it).

Every call goes to the NameNode's HTTP port on 127.0.0.1 with simple authentication as the current
OS user (the user the servers run as, who owns HBase's files); on a Kerberized HDFS (``tls`` and
``negotiate`` given) over HTTPS, verified as ``tls`` says (the stack's CA), each NameNode call with a fresh SPNEGO
token (``Authorization: Negotiate ...``) and no ``user.name`` (the NameNode refuses one that differs from
the authenticated user). A write or read is two requests, as WebHDFS defines them: the NameNode answers
``op=CREATE`` / ``op=OPEN`` with the DataNode that takes or serves the bytes (``noredirect=true``: as
JSON, so the body is sent once, to the DataNode, and no token goes to it: on a Kerberized HDFS the
location carries a delegation token). Errors are the ``urllib`` exceptions (``HTTPError`` with
WebHDFS's JSON ``RemoteException`` body, ``URLError``); the caller decides what they mean.
"""

from __future__ import annotations

import getpass
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["HdfsFile", "WebHdfs"]

#: the folder of the readiness probe's files (each one is deleted once read back)
PROBE_DIR = "/.hbase-ingest-probe"


@dataclass(frozen=True)
class HdfsFile:
    """A file of :meth:`WebHdfs.walk`: its absolute path and length in bytes (as the NameNode knows it)."""

    path: str
    length: int


class WebHdfs:
    """WebHDFS of the NameNode whose HTTP server listens on ``host:http_port``; with ``tls`` (a client
    context that trusts the servers' certificates) over HTTPS, and with ``negotiate`` (a new
    ``Authorization`` header value per call, ``Negotiate <token>``) authenticated by SPNEGO."""

    def __init__(self, host: str, http_port: int, timeout_s: float = 10.0, *, tls: ssl.SSLContext | None = None,
                 negotiate: Callable[[], str] | None = None) -> None:
        self.base = f"{'https' if tls is not None else 'http'}://{host}:{http_port}/webhdfs/v1"
        self.timeout_s = timeout_s
        self.user = getpass.getuser()
        self._tls = tls
        self._negotiate = negotiate

    def __repr__(self) -> str:
        who = "SPNEGO" if self._negotiate is not None else self.user
        return f"WebHdfs({self.base!r}, user={who!r})"

    def _url(self, path: str, op: str, **params: str) -> str:
        user = {"user.name": self.user} if self._negotiate is None else {}
        query = urllib.parse.urlencode({"op": op, **user, **params})
        return f"{self.base}{urllib.parse.quote(path)}?{query}"

    def _call(self, method: str, url: str, data: bytes | None = None) -> bytes:
        headers = {"Content-Type": "application/octet-stream"} if data is not None else {}
        if self._negotiate is not None and url.startswith(self.base):  # the NameNode, not a DataNode
            headers["Authorization"] = self._negotiate()
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout_s, context=self._tls) as resp:
            body: bytes = resp.read()
            return body

    def _json(self, method: str, url: str) -> Any:
        return json.loads(self._call(method, url) or b"null")

    def write(self, path: str, data: bytes) -> None:
        """Create (or overwrite) ``path`` holding ``data``; returns once the DataNode acknowledged it."""
        where = self._json("PUT", self._url(path, "CREATE", overwrite="true", noredirect="true"))
        self._call("PUT", where["Location"], data)

    def read(self, path: str) -> bytes:
        """The bytes of ``path`` (what its DataNodes hold, including a file still open for writing)."""
        where = self._json("GET", self._url(path, "OPEN", noredirect="true"))
        return self._call("GET", where["Location"])

    def delete(self, path: str, recursive: bool = False) -> bool:
        """Delete ``path``; False when there was nothing to delete."""
        return bool(self._json("DELETE", self._url(path, "DELETE", recursive=str(recursive).lower()))["boolean"])

    def walk(self, path: str) -> list[HdfsFile]:
        """Every file under the folder ``path`` (recursively), sorted by path; [] when it does not exist."""
        try:
            listing = self._json("GET", self._url(path, "LISTSTATUS"))["FileStatuses"]["FileStatus"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        out: list[HdfsFile] = []
        for entry in listing:
            child = f"{path.rstrip('/')}/{entry['pathSuffix']}"
            if entry["type"] == "DIRECTORY":
                out.extend(self.walk(child))
            else:
                out.append(HdfsFile(child, int(entry["length"])))
        return sorted(out, key=lambda f: f.path)

    def round_trip(self) -> None:
        """Write a unique file through the NameNode and a DataNode, read it back, delete it. Raises
        ``AssertionError`` when different bytes come back, the ``urllib`` errors otherwise."""
        path = f"{PROBE_DIR}/{uuid.uuid4().hex}"
        value = uuid.uuid4().bytes
        self.write(path, value)
        got = self.read(path)
        self.delete(path)
        if got != value:
            raise AssertionError(f"HDFS returned {got!r} for {path}, which was written with {value!r}")
