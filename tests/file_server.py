"""A loopback HTTP server that serves fixed bytes by path (a stand-in Maven repository for the
Thrift2 IDL download tests). Unknown paths get 404."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serve_files(files: Mapping[str, bytes]) -> Iterator[tuple[str, list[str]]]:
    """``(base_url, requested_paths)`` while a server on 127.0.0.1 answers ``GET path`` with
    ``files[path]``; ``requested_paths`` lists every request, in order."""
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/maven2", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
