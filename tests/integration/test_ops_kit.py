"""The operations kit against a real worker: ``hbase-ingest run --metrics`` (a subprocess, JSON logs)
ingests a few events, one of them bad, and every series that docs/ops' Grafana dashboard and alert
rules read is on its ``/metrics``; the server listens on 127.0.0.1 only, as no host was given."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
from prometheus_client.parser import text_string_to_metric_families

from connectors.hbase import HBaseClient
from tests.http_get import http_get
from tests.ops_kit import ROOT, used_metric_names

from .worker_support import drop_tables, order_event, order_settings, produce, setup, signal_and_wait, write_config

#: the series Prometheus stores for each family type of the text format
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count"),
             "gaugehistogram": ("_bucket", "_gsum", "_gcount")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def exported_series(text: str) -> tuple[set[str], dict[str, float]]:
    """(every series name the exposition ``text`` declares, as Prometheus stores it: a counter
    ``x`` is ``x_total``, a histogram ``x_bucket``/``x_sum``/``x_count``; the sum of each sample
    name's values)."""
    names: set[str] = set()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ("",)))
        for sample in family.samples:
            names.add(sample.name)
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return names, totals


def _listening_addresses(port: int) -> set[str]:
    """The local IPv4/IPv6 addresses with a TCP socket listening on ``port`` (from /proc/net)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


async def test_every_series_of_the_dashboard_and_alerts_is_exported(hbase: HBaseClient, unique: str,
                                                                      tmp_path: Path) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=2)
    good = [orjson.dumps(order_event(i)) for i in range(40)]
    bad = [b"{not json", orjson.dumps({"order_number": "X"})]
    port = _free_port()
    log_path = tmp_path / "worker.log"
    try:
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pipeline", "run", "--config", str(write_config(tmp_path / "w.toml", settings)),
                 "--metrics", "--metrics-port", str(port), "--log-format", "json", "--log-level", "INFO"],
                stdout=subprocess.PIPE, stderr=log, cwd=ROOT)
            try:
                await produce(settings, topic, good[:20] + bad + good[20:])
                text = await _scrape_when_done(port, events=len(good) + len(bad), proc=proc, log_path=log_path)
                if Path("/proc/net/tcp").exists():  # Linux: the listening socket, as the kernel has it
                    assert _listening_addresses(port) == {"127.0.0.1"}
                ready = (await http_get(port, "/readyz"))[0]
            except BaseException:
                proc.kill()
                raise
            code, out = await signal_and_wait(proc, signal.SIGTERM)
        assert code == 0, out + log_path.read_text()[-3000:]
    finally:
        await drop_tables(hbase, settings)

    names, totals = exported_series(text)
    used = used_metric_names()
    missing = {name: sorted(where) for name, where in used.items() if name not in names}
    assert not missing, f"read by docs/ops but not exported by the worker: {missing}"
    assert len(used) >= 15  # the scanner found the kit's names, not a handful
    assert ready == 200
    assert totals["hbase_ingest_events_consumed_total"] == len(good) + len(bad)
    assert totals["hbase_ingest_dead_lettered_total"] == len(bad)
    assert totals["hbase_ingest_rows_written_total"] == 3 * len(good)

    lines = log_path.read_text().splitlines()
    assert [line for line in lines if not line.startswith("{")] == []  # json: every line on stderr is an event
    events = [json.loads(line) for line in lines]
    assert [e["signal"] for e in events if e["event"] == "signal_received"] == ["SIGTERM"]
    (summary,) = [e for e in events if e["event"] == "run_summary"]
    assert (summary["consumed"], summary["dead_lettered"]) == (len(good) + len(bad), len(bad))
    listening = [e for e in events if e["event"] == "metrics_listening"]
    assert listening and listening[0]["host"] == "127.0.0.1" and listening[0]["port"] == port
    assert all({"timestamp", "level", "logger", "event"} <= set(e) for e in events)


async def _scrape_when_done(port: int, *, events: int, proc: subprocess.Popen[bytes], log_path: Path) -> str:
    """The ``/metrics`` text once the worker consumed ``events`` records, committed them (lag 0 on
    every partition) and reports ready."""
    last: Any = "no answer"
    deadline = anyio.current_time() + 90
    while anyio.current_time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the worker exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
        try:
            status, body = await http_get(port, "/metrics")
        except OSError:  # not listening yet
            await anyio.sleep(0.2)
            continue
        assert status == 200
        text = body.decode()
        _, totals = exported_series(text)
        lag = [s.value for f in text_string_to_metric_families(text) if f.name == "hbase_ingest_consumer_lag"
               for s in f.samples]
        last = {"consumed": totals.get("hbase_ingest_events_consumed_total"), "lag": lag,
                "ready": totals.get("hbase_ingest_ready")}
        if last == {"consumed": events, "lag": [0.0, 0.0], "ready": 1.0}:
            return text
        await anyio.sleep(0.3)
    raise AssertionError(f"the worker did not finish in 90 s: {last}; {log_path.read_text()[-3000:]}")
