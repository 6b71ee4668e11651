"""Where ``hbase:meta`` lives, read from ZooKeeper: the fallback of the RPC registry, for clusters
whose clients are given a ZooKeeper quorum (``hbase.zookeeper.quorum``) rather than master addresses.

One short session per look-up: connect, one ``getData`` of ``<parent>/meta-region-server``, close.
The znode is never watched; the region cache asks again after a relocation.

Byte layouts (ZooKeeper's jute encoding: big-endian ints and longs, a buffer or string as an int
length then its bytes, a boolean as one byte; every packet after a 4-byte length):

- ``ConnectRequest``: protocolVersion i32 = 0, lastZxidSeen i64 = 0, timeOut i32 (ms), sessionId
  i64 = 0, passwd buffer (16 zero bytes), readOnly bool = false.
- ``ConnectResponse``: protocolVersion i32, timeOut i32, sessionId i64, passwd buffer (readOnly bool).
  A timeOut of 0 means the server refused the session.
- request: ``RequestHeader`` (xid i32, type i32: ``getData`` = 4, ``closeSession`` = -11), then for
  ``getData`` the path (string) and watch (bool).
- reply: ``ReplyHeader`` (xid i32, zxid i64, err i32: 0 ok, -101 no such node), then for ``getData``
  the data (buffer) and a ``Stat`` (ignored).

The znode's data (what HBase writes): ``0xFF``, an i32 id length, that many id bytes, ``PBUF``, then
a ``MetaRegionServer`` protobuf whose field 1 is the ``ServerName`` (host 1, port 2, start code 3).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from connectors.hbase.native.messages import ServerName, decode_server_name
from connectors.hbase.native.wire import WireError, iter_fields
from pipeline.errors import HBaseUnavailable

__all__ = ["connect_request", "get_data_request", "meta_from_zookeeper", "parse_meta_znode", "read_get_data_reply"]

_I32 = struct.Struct(">i")
_CONNECT = struct.Struct(">iqiq")  # protocolVersion, lastZxidSeen, timeOut, sessionId
_HEADER = struct.Struct(">ii")  # xid, type
_REPLY = struct.Struct(">iqi")  # xid, zxid, err
_GET_DATA, _CLOSE = 4, -11
_NO_NODE = -101
_MAX_PACKET = 1 << 20


def _packet(body: bytes) -> bytes:
    return _I32.pack(len(body)) + body


def connect_request(timeout_ms: int) -> bytes:
    """The framed ``ConnectRequest`` of a new session."""
    return _packet(_CONNECT.pack(0, 0, timeout_ms, 0) + _I32.pack(16) + bytes(16) + b"\x00")


def get_data_request(xid: int, path: str) -> bytes:
    """The framed ``getData`` of ``path``, unwatched."""
    p = path.encode()
    return _packet(_HEADER.pack(xid, _GET_DATA) + _I32.pack(len(p)) + p + b"\x00")


def read_get_data_reply(body: bytes, path: str) -> bytes | None:
    """The data of a ``getData`` reply (``None``: the znode does not exist). Raises :class:`WireError`
    for another error code or a short reply."""
    if len(body) < _REPLY.size:
        raise WireError(f"ZooKeeper reply of {len(body)} bytes is shorter than its header")
    _, _, err = _REPLY.unpack_from(body)
    if err == _NO_NODE:
        return None
    if err != 0:
        raise WireError(f"ZooKeeper refused getData {path}: error code {err}")
    pos = _REPLY.size
    (size,) = _I32.unpack_from(body, pos)
    pos += 4
    if size < 0:
        return b""
    if pos + size > len(body):
        raise WireError("ZooKeeper getData reply ends inside its data")
    return body[pos:pos + size]


def parse_meta_znode(data: bytes) -> ServerName:
    """The server named by the ``meta-region-server`` znode's data (layout in the module docstring).
    Raises :class:`WireError` when the data is not HBase's."""
    if not data or data[0] != 0xFF or len(data) < 5:
        raise WireError(f"meta-region-server data does not start with HBase's marker: {data[:16]!r}")
    (id_len,) = _I32.unpack_from(data, 1)
    rest = data[5 + id_len:]
    if not rest.startswith(b"PBUF"):
        raise WireError(f"meta-region-server data has no PBUF magic after its {id_len}-byte id")
    for field, value in iter_fields(rest[4:]):
        if field == 1 and isinstance(value, bytes):
            server = decode_server_name(value)
            if server.host and server.port:
                return server
    raise WireError("meta-region-server data names no server")


async def _read_packet(reader: BufferedByteReceiveStream) -> bytes:
    (size,) = _I32.unpack(await reader.receive_exactly(4))
    if not 0 <= size <= _MAX_PACKET:
        raise WireError(f"ZooKeeper packet of {size} bytes")
    return await reader.receive_exactly(size)


async def _ask(host: str, port: int, path: str, timeout_s: float) -> bytes | None:
    async with await anyio.connect_tcp(host, port) as stream:
        reader = BufferedByteReceiveStream(stream)
        await stream.send(connect_request(max(int(timeout_s * 1000), 4000)))
        body = await _read_packet(reader)
        if len(body) < 16 or _I32.unpack_from(body, 4)[0] <= 0:
            raise WireError("ZooKeeper refused the session")
        await stream.send(get_data_request(1, path))
        data = read_get_data_reply(await _read_packet(reader), path)
        await stream.send(_packet(_HEADER.pack(2, _CLOSE)))  # end the session now rather than at its timeout
        return data


def _address(spec: str) -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else (spec, 2181)


async def meta_from_zookeeper(quorum: Sequence[str], parent: str = "/hbase", *, timeout_s: float = 10.0) -> ServerName:
    """The server of ``hbase:meta`` as ``<parent>/meta-region-server`` names it, asked of each member of
    ``quorum`` (``host:port``; the port defaults to 2181) in turn until one answers. Raises
    :class:`~pipeline.errors.HBaseUnavailable` naming every member's failure."""
    path = parent.rstrip("/") + "/meta-region-server"
    errors: list[str] = []
    for spec in quorum:
        host, port = _address(spec)
        try:
            with anyio.fail_after(timeout_s):
                data = await _ask(host, port, path, timeout_s)
        except (OSError, TimeoutError, anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                WireError) as e:
            errors.append(f"{host}:{port}: {e!r}")
            continue
        if data is None:
            errors.append(f"{host}:{port}: no znode {path} (is the parent znode {parent!r} right?)")
            continue
        try:
            return parse_meta_znode(data)
        except WireError as e:
            errors.append(f"{host}:{port}: {e}")
    raise HBaseUnavailable(f"ZooKeeper could not say where hbase:meta is: {'; '.join(errors)}")
