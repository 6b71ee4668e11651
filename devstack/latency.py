"""Distance between a client and the stack's servers: Toxiproxy (Shopify's TCP proxy) in front of them,
adding a round trip of ``rtt_ms`` (and jitter) to every byte that crosses it.

Every hop of the local stack is loopback, with round trips of microseconds; a production worker sits a
millisecond or more from its gateways. This kernel has no ``netem`` qdisc, so the delay comes from a
proxy in user space: Toxiproxy's ``latency`` toxic holds each chunk of data for ``latency`` ms (plus or
minus ``jitter``) before passing it on, without serializing the stream (chunks in flight overlap). A
round trip of ``rtt_ms`` is ``rtt_ms / 2`` on the upstream (client to server) and ``rtt_ms / 2`` on the
downstream stream of a proxy.

Toxiproxy is built from its Go module (``go install``, :data:`TOXIPROXY_VERSION`) into the cache folder
the first time it is needed (about 30 s and 16 MB; ``go`` on PATH, or where Go's tarball puts it), and runs as the
``toxiproxy`` process of the state folder (pid file and log there; ``stack down`` stops it too). Its
REST API listens on loopback, ``api_port``; each proxy listens on a loopback port of its own and forwards
to one upstream port. A proxy with no toxic adds only the copy through a user-space process: a benchmark
that compares round trips runs its 0 ms case through the proxy too, so that only the delay differs.

Kafka needs more than a proxy: a client asks the broker where to connect and then goes there. The
broker's DISTANT listener (``kafka_distant_port``, by default ``kafka_port + 5``; plaintext, rendered
into every Kafka config) is advertised one port above it, where a proxy to it listens; a client
bootstrapped there (:attr:`.LocalStack.distant_bootstrap`) makes every broker call through the proxy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import StackError

from .layout import StackLayout
from .processes import OwnedProcess, port_in_use, tail
from .topology import HOST

__all__ = ["PROXY_PROCESS", "TOXIPROXY_VERSION", "Proxy", "Toxiproxy", "ensure_toxiproxy"]

TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
TOXIPROXY_VERSION = "v2.5.0"
#: the process name (pid file ``toxiproxy.pid``, log ``toxiproxy.log`` in the state folder)
PROXY_PROCESS = "toxiproxy"
#: where Go's own tarball installs it, for shells whose PATH leaves it out (a non-interactive one)
GO_FALLBACKS = (Path("/usr/local/go/bin/go"),)
#: the REST API's default loopback port (clear of the stack's: Kafka 909x, Thrift 909x/91xx, HBase 16xxx)
DEFAULT_API_PORT = 18474


def ensure_toxiproxy(layout: StackLayout, timeout_s: float = 600.0) -> Path:
    """The ``toxiproxy-server`` binary of :data:`TOXIPROXY_VERSION` in the cache folder, built from its Go
    module on first use. Raises :class:`StackError` when ``go`` is missing or the build fails (the last
    lines of its output)."""
    binary = layout.cache / "toxiproxy" / TOXIPROXY_VERSION / "toxiproxy-server"
    if binary.is_file():
        return binary
    go = shutil.which("go") or next((str(p) for p in GO_FALLBACKS if p.is_file()), None)
    if go is None:
        raise StackError("`go` was not found on PATH: the latency proxy (Toxiproxy) is built from its Go module; "
                         "install Go 1.21 or newer (e.g. `apt-get install golang`) or put its bin folder on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as gobin:
        env = {**os.environ, "GOBIN": gobin, "GOFLAGS": "-buildvcs=false"}
        try:
            built = subprocess.run([go, "install", f"{TOXIPROXY_MODULE}@{TOXIPROXY_VERSION}"], env=env,
                                   capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"building Toxiproxy {TOXIPROXY_VERSION} took over {timeout_s:.0f} s") from exc
        if built.returncode != 0:
            last = "\n".join((built.stdout + built.stderr).strip().splitlines()[-10:])
            raise StackError(f"building Toxiproxy {TOXIPROXY_VERSION} with `go install` failed "
                             f"(exit {built.returncode}):\n{last}")
        Path(gobin, "server").replace(binary)  # atomic: a binary there is complete
    return binary


@dataclass(frozen=True)
class Proxy:
    """One proxy: clients connect to ``HOST:listen_port``, it connects to ``HOST:upstream_port``."""

    name: str
    listen_port: int
    upstream_port: int


class Toxiproxy:
    """The Toxiproxy server of a state folder and its REST API (``http://127.0.0.1:<api_port>``)."""

    def __init__(self, layout: StackLayout, api_port: int = DEFAULT_API_PORT) -> None:
        self.layout = layout
        self.api_port = api_port
        self.process = OwnedProcess(PROXY_PROCESS, layout.pid_file(PROXY_PROCESS), layout.log_file(PROXY_PROCESS))

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the server unless it runs (building it first if needed), then wait for its API to answer.
        Raises :class:`StackError` when its port is taken by another process or it does not answer."""
        if self.process.pid() is None:
            binary = ensure_toxiproxy(self.layout)
            if port_in_use(self.api_port):
                raise StackError(f"port {self.api_port} (Toxiproxy's API) is in use by a process this stack did "
                                 "not start; choose another api_port")
            self.process.start([str(binary), "-host", HOST, "-port", str(self.api_port)])
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._call("GET", "/version")
            except (OSError, StackError) as exc:
                self.process.check_alive()
                if time.monotonic() > deadline:
                    raise StackError(f"Toxiproxy did not answer on {HOST}:{self.api_port} within {timeout_s:.0f} s "
                                     f"({exc}); its log:\n{tail(self.process.log_file)}") from exc
                time.sleep(0.2)
            else:
                return

    def stop(self) -> bool:
        """Stop the server (every proxy goes with it). Whether it was running."""
        return self.process.stop()

    def proxy(self, name: str, listen_port: int, upstream_port: int) -> Proxy:
        """Make (or make again, without toxics) the proxy ``name`` from ``listen_port`` to ``upstream_port``."""
        self._call("DELETE", f"/proxies/{name}", missing_ok=True)
        self._call("POST", "/proxies", {"name": name, "listen": f"{HOST}:{listen_port}",
                                        "upstream": f"{HOST}:{upstream_port}", "enabled": True})
        return Proxy(name, listen_port, upstream_port)

    def set_rtt(self, proxy: Proxy, rtt_ms: int, jitter_ms: int = 0) -> None:
        """Give ``proxy`` a round trip of ``rtt_ms`` whole milliseconds (Toxiproxy counts whole ones): the
        request path (upstream) gets ``rtt_ms - rtt_ms // 2``, the answer path ``rtt_ms // 2``, each
        +- ``jitter_ms // 2``. 0 removes the delay."""
        if rtt_ms < 0 or jitter_ms < 0:
            raise ValueError(f"rtt_ms={rtt_ms}, jitter_ms={jitter_ms}: both must be >= 0")
        for stream in ("upstream", "downstream"):
            self._call("DELETE", f"/proxies/{proxy.name}/toxics/latency_{stream}", missing_ok=True)
        for stream, ms in (("upstream", rtt_ms - rtt_ms // 2), ("downstream", rtt_ms // 2)):
            if ms:
                self._call("POST", f"/proxies/{proxy.name}/toxics", {
                    "name": f"latency_{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                    "attributes": {"latency": ms, "jitter": jitter_ms // 2}})

    def _call(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{HOST}:{self.api_port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read()
                is_json = "json" in resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            raise StackError(f"Toxiproxy refused {method} {path}: HTTP {exc.code} "
                             f"{exc.read().decode(errors='replace')[:300]}") from exc
        return json.loads(text) if is_json and text.strip() else text.decode(errors="replace")
