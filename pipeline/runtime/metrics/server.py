"""``/metrics``, ``/healthz`` and ``/readyz`` over a plain anyio TCP listener (``Connection: close``).

``/readyz`` answers 200 when :meth:`~pipeline.runtime.metrics.registry.Metrics.ready` holds, else 503
with the failing checks, one per line. Requests are bounded (16 KiB of head, 10 s).
"""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream, TaskStatus
from prometheus_client import CONTENT_TYPE_LATEST

from pipeline.runtime.metrics.registry import Metrics

__all__ = ["MetricsServer"]

log = structlog.get_logger("hbase_ingest.metrics")
_MAX_REQUEST = 16 * 1024

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` over a plain anyio TCP listener."""

    def __init__(self, metrics: Metrics, host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.requests = 0

    def __repr__(self) -> str:
        return f"MetricsServer({self.host}:{self.port}, requests={self.requests})"

    def respond(self, method: str, target: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request; pure apart from reading the metrics."""
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"only GET\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.metrics.render()
        if path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            ok, checks = self.metrics.ready()
            body = "".join(f"{k}: {v}\n" for k, v in checks.items()).encode()
            return (200 if ok else 503), "text/plain", body
        return 404, "text/plain", b"try /metrics, /healthz or /readyz\n"

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(10):
                    data = b""
                    while b"\r\n\r\n" not in data and b"\n\n" not in data:
                        data += await stream.receive(4096)
                        if len(data) > _MAX_REQUEST:
                            await stream.send(_response(431, "text/plain", b"request too large\n"))
                            return
                    parts = data.split(b"\n", 1)[0].decode("latin-1").split()
                    if len(parts) < 2:
                        await stream.send(_response(400, "text/plain", b"bad request line\n"))
                        return
                    self.requests += 1
                    status, ctype, body = self.respond(parts[0], parts[1])
                    await stream.send(_response(status, ctype, b"" if parts[0] == "HEAD" else body, len(body)))
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                TimeoutError,
                OSError,
            ):
                pass

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; ``task_status.started(port)`` gives the bound port."""
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.requested_port)
        async with listener:
            self.port = int(listener.listeners[0].extra(SocketAttribute.local_port))
            log.info("metrics_listening", host=self.host, port=self.port)
            task_status.started(self.port)
            await listener.serve(self._handle)


def _response(status: int, ctype: str, body: bytes, length: int | None = None) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
