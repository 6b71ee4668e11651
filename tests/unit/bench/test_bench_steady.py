"""bench_steady's pure parts: ``--kinds``, the latency percentiles of a 1 ms histogram, the lines the
worker child and the Flink job print (the job's format against its source), the Flink source's
"consuming" signal from REST metrics, Flink's SQL with the offset in the row key, and how Flink runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_steady import (
    _CAP_MS,
    FLINK,
    KINDS,
    Line,
    Progress,
    _pairs,
    flink_settings,
    latency_summary,
    parse_kinds,
    parse_line,
    settings_for,
    source_consuming,
)
from bench.peer_flink import FlinkJob, job_sql

JOB_SOURCE = Path(__file__).resolve().parents[3] / "infra" / "flink" / "FlinkPeerJob.java"


def test_kinds_are_taken_in_order_and_checked() -> None:
    assert parse_kinds("ingest,flink") == ["ingest", FLINK]
    assert parse_kinds(" flink , fetch_default,ingest") == [FLINK, "fetch_default", "ingest"]
    with pytest.raises(ValueError, match="unknown kinds spark"):
        parse_kinds("ingest,spark")
    for bad in ("", ",", "flink,flink"):
        with pytest.raises(ValueError, match="each once"):
            parse_kinds(bad)
    assert set(KINDS) == {"ingest", "fetch_default", "fetch_256k_100ms", "native"}
    native, ingest = settings_for("native", "t", "tb", 4), settings_for("ingest", "t", "tb", 4)
    assert native.hbase.client == "native" and ingest.hbase.client == "thrift"
    assert native.kafka == ingest.kafka
    assert settings_for("fetch_default", "t", "tb", 4).kafka.fetch_min_bytes == 1


def test_latency_percentiles_are_the_first_bucket_reaching_the_share() -> None:
    hist = {3: 50, 7: 49, 900: 1}
    assert latency_summary(hist) == {"p50": 3, "p99": 7, "max": 900}
    assert latency_summary({0: 1}) == {"p50": 0, "p99": 0, "max": 0}
    assert latency_summary({5: 0, 8: 2}) == {"p50": 8, "p99": 8, "max": 8}
    assert latency_summary({}) == {"p50": None, "p99": None, "max": None}
    dense = [0] * (_CAP_MS + 1)
    dense[1], dense[_CAP_MS] = 99, 1
    assert _pairs(dense) == [[1, 99], [_CAP_MS, 1]]
    assert latency_summary({ms: n for ms, n in _pairs(dense)}) == {"p50": 1, "p99": 1, "max": _CAP_MS}
    assert latency_summary({1: 98, _CAP_MS: 2})["p99"] == _CAP_MS


def test_lines_of_the_child_and_the_job() -> None:
    assert parse_line('{"started": true}\n') == Line(started=True)
    assert parse_line('{"written": 1200}') == Line(written=1200)
    assert parse_line('{"latency_hist": [[12, 3], [140, 2000]], "flushes": 4}') == Line(
        hist={12: 3, 140: 2000}, flushes=4)
    assert parse_line('{"latency_hist": [], "flushes": 0}') == Line(hist={}, flushes=0)
    assert parse_line('{"result": {"rows": 3}}') == Line(result={"rows": 3})
    assert parse_line("SLF4J: a log line") == Line() == parse_line("")
    with pytest.raises(ValueError, match="Expecting value"):
        parse_line('{"written": ')


def test_the_job_prints_what_parse_line_reads() -> None:
    source = JOB_SOURCE.read_text()
    assert 'System.out.println("{\\"written\\": " + n + "}");' in source
    assert 'new StringBuilder("{\\"latency_hist\\": [");' in source
    assert '.append(\'[\').append(ms).append(", ").append(copy[ms]).append(\']\')' in source
    assert 'append("], \\"flushes\\": ").append(FLUSHES.get()).append(\'}\')' in source
    assert re.search(r"static final int CAP_MS = 60_000;", source) and _CAP_MS == 60_000


def test_progress_runs_the_end_of_the_window_once_at_the_total() -> None:
    lines = ['{"written": 0}', '{"written": 5}', "noise", '{"written": 10}', '{"written": 12}',
             '{"latency_hist": [[1, 12]], "flushes": 2}']
    script = f"import sys; sys.stdin.readline(); print({chr(10).join(lines)!r})"  # once armed
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    calls: list[int] = []
    progress = Progress(proc)
    progress.arm(10, lambda: calls.append(progress.written))
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    proc.wait(10)
    assert progress.closed.wait(10)
    assert progress.done.is_set() and len(calls) == 1
    assert progress.written == 12 and progress.hist == {1: 12} and progress.flushes == 2
    assert progress.error is None


def _metrics(fetches: dict[int, str], partitions: dict[int, list[int]]) -> dict[str, str]:
    op = "Source__src[1]"
    out = {f"{s}.{op}.KafkaSourceReader.KafkaConsumer.fetch-total": v for s, v in fetches.items()}
    for s, ps in partitions.items():
        for p in ps:
            out[f"{s}.{op}.KafkaSourceReader.topic.steady-ab12.partition.{p}.currentOffset"] = "-1"
    return out


def test_the_source_consumes_once_every_partition_is_assigned_and_every_reader_fetched() -> None:
    both = {0: [0, 2, 4, 6], 1: [1, 3, 5, 7]}
    assert source_consuming(_metrics({0: "3.0", 1: "1"}, both), 2, 8)
    assert not source_consuming(_metrics({0: "3.0", 1: "0.0"}, both), 2, 8)  # reader 1 never fetched
    assert not source_consuming(_metrics({0: "3.0"}, both), 2, 8)
    assert not source_consuming(_metrics({0: "1", 1: "1"}, {0: [0, 2, 4, 6], 1: [1, 3, 5]}), 2, 8)
    assert not source_consuming({}, 2, 8)
    assert not source_consuming({"0.Source__src[1].numRecordsIn": "9"}, 2, 8)


def test_flink_keys_end_with_the_record_s_partition_and_offset_on_demand() -> None:
    job = FlinkJob("127.0.0.1:9092", "t1", "g1", "tb1", "127.0.0.1:2181")
    plain, unique = job_sql(job), job_sql(job, offset_in_key=True)
    assert "METADATA" not in plain and "CONCAT(hostname, '|', log_event, '|', `timestamp`)" in plain
    assert "kafka_partition INT METADATA FROM 'partition' VIRTUAL" in unique
    assert "kafka_offset BIGINT METADATA FROM 'offset' VIRTUAL" in unique
    assert ("CONCAT(hostname, '|', log_event, '|', `timestamp`, '|', CAST(kafka_partition AS STRING), '|', "
            "CAST(kafka_offset AS STRING))") in unique
    assert len([s for s in re.split(r";\s*(?:\r?\n|$)", unique) if s.strip()]) == 3


def test_flink_runs_with_the_peer_benchmark_s_tuning() -> None:
    s = flink_settings()
    assert (s["parallelism"], s["heap_mb"], s["checkpoint_interval_s"]) == (2, 1024, 5)
    assert (s["flush_max_rows"], s["flush_max_size"], s["flush_interval_ms"]) == (2000, "4mb", 200)
    assert s["max_poll_records"] == 5000 and s["versions"]["flink"] == "1.19.3"
    assert s["settings"]["execution.checkpointing.interval"] == "5 s"
    assert "partition|offset" in s["row_key"]
