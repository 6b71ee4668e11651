"""The ZooKeeper look-up of hbase:meta: jute packets and the znode HBase writes (pure functions)."""

from __future__ import annotations

import struct

import pytest

from connectors.hbase.native.messages import ServerName
from connectors.hbase.native.wire import WireError, pb_bytes, pb_str, pb_uint
from connectors.hbase.native.zookeeper import (
    connect_request,
    get_data_request,
    parse_meta_znode,
    read_get_data_reply,
)


def znode(host: str = "rs1.example", port: int = 16020, code: int = 1795852289354, ident: bytes = b"4242@m1") -> bytes:
    """What HBase's MetaTableLocator writes: marker, id, PBUF, MetaRegionServer{server, rpc_version, state}."""
    server = pb_str(1, host) + pb_uint(2, port) + pb_uint(3, code)
    meta_region_server = pb_bytes(1, server) + pb_uint(2, 0) + pb_uint(3, 3)
    return b"\xff" + struct.pack(">i", len(ident)) + ident + b"PBUF" + meta_region_server


def test_the_meta_znode_names_its_server() -> None:
    assert parse_meta_znode(znode()) == ServerName("rs1.example", 16020, 1795852289354)
    assert parse_meta_znode(znode(ident=b"")) == ServerName("rs1.example", 16020, 1795852289354)
    for bad, why in ((b"", "marker"), (b"PBUF" + pb_bytes(1, b""), "marker"),
                     (b"\xff\x00\x00\x00\x02ab" + b"JUNK", "PBUF"),
                     (znode(host=""), "names no server")):
        with pytest.raises(WireError, match=why):
            parse_meta_znode(bad)


def test_packets_are_framed_as_jute_lays_them_out() -> None:
    c = connect_request(10_000)
    assert struct.unpack(">i", c[:4])[0] == len(c) - 4 == 4 + 8 + 4 + 8 + 4 + 16 + 1
    assert struct.unpack(">iqiq", c[4:28]) == (0, 0, 10_000, 0)
    g = get_data_request(7, "/hbase/meta-region-server")
    assert g[4:12] == struct.pack(">ii", 7, 4)
    assert g[12:16] == struct.pack(">i", 25) and g[16:41] == b"/hbase/meta-region-server" and g[41:] == b"\x00"


def test_get_data_replies() -> None:
    header = struct.pack(">iqi", 1, 99, 0)
    data = znode()
    assert read_get_data_reply(header + struct.pack(">i", len(data)) + data + bytes(68), "/p") == data
    assert read_get_data_reply(struct.pack(">iqi", 1, 99, -101), "/p") is None
    with pytest.raises(WireError, match="error code -4"):
        read_get_data_reply(struct.pack(">iqi", 1, 99, -4), "/p")
    with pytest.raises(WireError, match="ends inside"):
        read_get_data_reply(header + struct.pack(">i", 50) + b"short", "/p")
    with pytest.raises(WireError, match="shorter"):
        read_get_data_reply(b"\x00" * 5, "/p")
