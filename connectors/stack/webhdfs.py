"""A minimal WebHDFS client for the local cluster's HDFS (``stack up --hdfs``): the readiness round
trip, and reading files back (tests copy HBase's WAL files out with it).

Every call goes to the NameNode's HTTP port on 127.0.0.1 with simple authentication as the current
OS user (the user the servers run as, who owns HBase's files). A write is two requests, as WebHDFS
defines it: the NameNode answers ``op=CREATE`` with the DataNode that takes the bytes
(``noredirect=true``: as JSON, so the body is sent once, to the DataNode); a read follows the
NameNode's redirect to a DataNode. Errors are the ``urllib`` exceptions (``HTTPError`` with
WebHDFS's JSON ``RemoteException`` body, ``URLError``); the caller decides what they mean.
"""

from __future__ import annotations

import getpass
import json
import urllib.parse
import urllib.request
import uuid
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
    """WebHDFS of the NameNode whose HTTP server listens on ``host:http_port``."""

    def __init__(self, host: str, http_port: int, timeout_s: float = 10.0) -> None:
        self.base = f"http://{host}:{http_port}/webhdfs/v1"
        self.timeout_s = timeout_s
        self.user = getpass.getuser()

    def __repr__(self) -> str:
        return f"WebHdfs({self.base!r}, user={self.user!r})"

    def _url(self, path: str, op: str, **params: str) -> str:
        query = urllib.parse.urlencode({"op": op, "user.name": self.user, **params})
        return f"{self.base}{urllib.parse.quote(path)}?{query}"

    def _call(self, method: str, url: str, data: bytes | None = None) -> bytes:
        headers = {"Content-Type": "application/octet-stream"} if data is not None else {}
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
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
        return self._call("GET", self._url(path, "OPEN"))

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
