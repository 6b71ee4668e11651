"""A raw HTTP/1.1 request to the metrics server on loopback, for its unit and integration tests."""

from __future__ import annotations

import anyio


async def http_get(port: int, path: str, raw: bytes | None = None) -> tuple[int, bytes]:
    """``(status, body)`` of ``GET path`` on ``127.0.0.1:port`` (or of the ``raw`` request bytes),
    read until the server closes the connection."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(raw or f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        data = b""
        try:
            while True:
                data += await stream.receive()
        except anyio.EndOfStream:
            pass
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body
