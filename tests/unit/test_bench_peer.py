"""The pure parts of the peer benchmark: Flume's agent config and row keys, its metrics, the
classpath merge by artifact, the loader's rows file and the figures."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import orjson
import pytest

from bench.peer_flume import (
    COLUMNS,
    EVENT_REGEX,
    FlumeAgent,
    agent_properties,
    drained,
    jar_artifact,
    merge_classpath,
    row_key,
    split_keys,
)
from bench.peer_ingest import ingest_settings, parse_progress
from bench.peer_loader import encode_rows
from bench.peer_summary import figures, markdown_table, summarize
from pipeline.core.examples import generate

AGENT = FlumeAgent(bootstrap="127.0.0.1:9092", topic="t1", group="g1", table="tb1", zookeeper_quorum="127.0.0.1:2181")


def _props(text: str) -> dict[str, str]:
    """Parse a properties file the way java.util.Properties does for these lines (key = value,
    backslash escapes)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" = ")
        out[key] = re.sub(r"\\(.)", r"\1", value)
    return out


# -- the agent ---------------------------------------------------------------------------------------


def test_agent_wires_source_channel_sink() -> None:
    p = _props(agent_properties(AGENT))
    assert p["agent.sources"] == "r1" and p["agent.channels"] == "c1" and p["agent.sinks"] == "k1"
    assert p["agent.sources.r1.channels"] == "c1" and p["agent.sinks.k1.channel"] == "c1"
    assert p["agent.sources.r1.kafka.topics"] == "t1"
    assert p["agent.sources.r1.kafka.consumer.group.id"] == "g1"
    assert p["agent.sources.r1.kafka.consumer.auto.offset.reset"] == "earliest"
    assert p["agent.sources.r1.batchSize"] == "5000"
    assert p["agent.sinks.k1.type"] == "hbase2" and p["agent.sinks.k1.table"] == "tb1"
    assert p["agent.sinks.k1.batchSize"] == "1000"
    assert p["agent.sinks.k1.zookeeperQuorum"] == "127.0.0.1:2181"
    assert p["agent.sinks.k1.serializer.colNames"] == "ROW_KEY,lv,v,m"
    assert p["agent.sinks.k1.serializer.rowKeyIndex"] == "0"


def test_agent_regex_survives_properties_escaping() -> None:
    p = _props(agent_properties(AGENT))
    assert p["agent.sinks.k1.serializer.regex"] == EVENT_REGEX


def test_agent_name_prefixes_every_key() -> None:
    text = agent_properties(AGENT, name="a2")
    assert all(line.startswith("a2.") for line in text.splitlines())


def test_empty_property_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"agent\.sinks\.k1\.table is empty"):
        agent_properties(FlumeAgent(bootstrap="b:1", topic="t", group="g", table=" ", zookeeper_quorum="z:1"))


# -- row keys and splits -----------------------------------------------------------------------------


def test_regex_has_one_group_per_column() -> None:
    assert re.compile(EVENT_REGEX).groups == len(COLUMNS)


def test_every_example_event_matches_and_keys_are_unique() -> None:
    bodies = [orjson.dumps(e) for _, e in generate("logs", 3000)]
    keys = [row_key(b) for b in bodies]
    assert len(set(keys)) == len(keys)
    assert keys[0].startswith(b"web") and b'"timestamp":' in keys[0]


def test_regex_groups_are_the_design_cells() -> None:
    _, event = next(iter(generate("logs", 1)))
    m = re.fullmatch(EVENT_REGEX, orjson.dumps(event).decode())
    assert m is not None
    cells = dict(zip(COLUMNS, m.groups(), strict=True))
    assert cells["lv"] == event["level"] and cells["m"] == event["message"]
    assert cells["v"] == orjson.dumps(event["value"]).decode()


def test_a_message_with_escaped_quotes_and_backslashes_is_one_group() -> None:
    _, event = next(iter(generate("logs", 1)))
    event["message"] = 'said "no" \\ then \\"quoted\\"'
    m = re.fullmatch(EVENT_REGEX, orjson.dumps(event).decode())
    assert m is not None and orjson.loads(f'"{m.group(4)}"') == event["message"]
    assert "*+" in EVENT_REGEX and "|" not in EVENT_REGEX  # possessive, no per-character alternation


def test_the_source_polls_as_many_records_as_a_batch() -> None:
    p = _props(agent_properties(AGENT))
    assert p["agent.sources.r1.kafka.consumer.max.poll.records"] == "5000" == p["agent.sources.r1.batchSize"]


def test_non_matching_event_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not match"):
        row_key(b'{"hostname":"web01"}')


def test_split_keys_are_even_quantiles() -> None:
    keys = [bytes([i]) for i in range(160)]
    splits = split_keys(reversed(keys), 16)
    assert splits == [bytes([10 * i]) for i in range(1, 16)]


def test_split_keys_spread_example_rows_over_every_region() -> None:
    keys = [row_key(orjson.dumps(e)) for _, e in generate("logs", 4000)]
    splits = split_keys(keys, 16)
    counts = [0] * 16
    for k in keys:
        counts[sum(k >= s for s in splits)] += 1
    assert min(counts) > 4000 / 16 / 2


@pytest.mark.parametrize(("keys", "regions", "message"), [
    ([b"a", b"b"], 0, "regions must be >= 1"),
    ([b"a", b"a", b"b"], 3, "at least 3 distinct"),
])
def test_split_keys_refuses(keys: list[bytes], regions: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_keys(keys, regions)


# -- metrics -----------------------------------------------------------------------------------------


def test_drained_reads_the_sink_counter() -> None:
    body = json.dumps({"SOURCE.r1": {"EventAcceptedCount": "900"},
                       "SINK.k1": {"EventDrainSuccessCount": "700", "BatchCompleteCount": "7"}})
    assert drained(body) == 700
    assert drained(body.encode(), sink="k2") == 0
    assert drained("{}") == 0


@pytest.mark.parametrize("body", ["<html>", "[1, 2]"])
def test_drained_refuses_what_is_not_a_json_object(body: str) -> None:
    with pytest.raises(ValueError, match="Flume metrics"):
        drained(body)


# -- classpath merge ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "artifact"), [
    ("hbase-client-2.6.1-hadoop3.jar", "hbase-client"),
    ("log4j-1.2-api-2.17.2.jar", "log4j-1.2-api"),
    ("zstd-jni-1.4.5-6.jar", "zstd-jni"),
    ("guava-27.0-jre.jar", "guava"),
    ("guava-11.0.2.jar", "guava"),
    ("kafka_2.13-2.7.2.jar", "kafka_2.13"),
    ("jetty-http-9.4.41.v20210516.jar", "jetty-http"),
    ("listenablefuture-9999.0-empty-to-avoid-conflict-with-guava.jar", "listenablefuture"),
    ("hadoop-shaded-protobuf_3_7-1.1.1.jar", "hadoop-shaded-protobuf_3_7"),
    ("netty-transport-native-epoll-4.1.105.Final.jar", "netty-transport-native-epoll"),
    ("netty-transport-native-epoll-4.1.77.Final-linux-x86_64.jar", "netty-transport-native-epoll:linux-x86_64"),
    ("netty-resolver-dns-native-macos-4.1.72.Final-osx-aarch_64.jar", "netty-resolver-dns-native-macos:osx-aarch_64"),
])
def test_jar_artifact(name: str, artifact: str) -> None:
    assert jar_artifact(name) == artifact


@pytest.mark.parametrize("name", ["hbase-client.jar", "README.txt", "1.0.jar"])
def test_jar_artifact_refuses_other_names(name: str) -> None:
    with pytest.raises(ValueError, match="not a Maven jar name"):
        jar_artifact(name)


def test_merge_keeps_first_versions_and_adds_the_rest_in_order() -> None:
    hbase = [Path("h/hbase-client-2.6.1-hadoop3.jar"), Path("h/zookeeper-3.8.4.jar"), Path("h/guava-27.0-jre.jar"),
             Path("h/netty-transport-native-epoll-4.1.105.Final.jar")]
    flume = [Path("f/flume-ng-core-1.11.0.jar"), Path("f/guava-11.0.2.jar"), Path("f/kafka-clients-2.7.2.jar"),
             Path("f/zookeeper-3.6.2.jar"), Path("f/netty-transport-native-epoll-4.1.72.Final-linux-x86_64.jar")]
    merged = merge_classpath(hbase, flume)
    assert merged == [*hbase, Path("f/flume-ng-core-1.11.0.jar"), Path("f/kafka-clients-2.7.2.jar"),
                      Path("f/netty-transport-native-epoll-4.1.72.Final-linux-x86_64.jar")]


def test_merge_takes_one_of_each_artifact_from_the_second_list() -> None:
    merged = merge_classpath([], [Path("a/netty-all-4.1.72.Final.jar"), Path("b/netty-all-4.1.77.Final.jar")])
    assert merged == [Path("a/netty-all-4.1.72.Final.jar")]


# -- the loader's rows file --------------------------------------------------------------------------


def test_rows_file_layout() -> None:
    data = encode_rows([(b"\x01k", {b"l:v": b"7.5", b"l:m": b""}, 1234)])
    expected = (struct.pack(">i", 1) + struct.pack(">H", 2) + b"\x01k" + struct.pack(">qB", 1234, 2)
                + struct.pack(">H", 1) + b"l" + struct.pack(">H", 1) + b"v" + struct.pack(">i", 3) + b"7.5"
                + struct.pack(">H", 1) + b"l" + struct.pack(">H", 1) + b"m" + struct.pack(">i", 0))
    assert data == expected
    assert encode_rows([]) == struct.pack(">i", 0)


@pytest.mark.parametrize(("row", "message"), [
    ((b"", {b"l:v": b"1"}, 0), "row key of 0 bytes"),
    ((b"k", {b"lv": b"1"}, 0), "not family:qualifier"),
    ((b"k", {b":v": b"1"}, 0), "not family:qualifier"),
    ((b"k" * 70000, {}, 0), "must be 1..65535"),
])
def test_rows_file_refuses(row: tuple[bytes, dict[bytes, bytes], int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_rows([row])


# -- hbase-ingest's side -----------------------------------------------------------------------------


def test_ingest_settings_are_bench_workers_under_new_names() -> None:
    from bench.bench_worker import bench_settings

    base = bench_settings(8)
    s = ingest_settings("topic-x", "table_x", "dlq-x")
    assert s.writer == base.writer and s.hbase == base.hbase
    assert s.kafka.max_poll_records == base.kafka.max_poll_records and s.kafka.dead_letter_topic == "dlq-x"
    (route,) = s.routes
    assert (route.topic, route.table) == ("topic-x", "table_x")
    assert route.rowkey == base.routes[0].rowkey and route.columns == base.routes[0].columns
    assert s.tables[0].name == "table_x" and s.tables[0].regions == 16


def test_parse_progress() -> None:
    assert parse_progress('{"written": 12}') == (12, None)
    assert parse_progress('{"summary": {"rows": 3}}') == (None, {"rows": 3})
    assert parse_progress("a log line") == (None, None)


# -- figures -----------------------------------------------------------------------------------------


def _run(system: str, first: float, last: float, cpu: float, hbase: float, rss: float) -> dict[str, object]:
    return {"system": system, "rows": 1000, "first_rows": 100, "first_write_s": first, "all_written_s": last,
            "process_cpu_s": cpu, "hbase_cpu_s": hbase, "peak_rss_mb": rss}


def test_figures_of_one_run() -> None:
    f = figures(_run("flume", 1.0, 4.0, 0.5, 0.25, 900.0))
    assert f == {"events_per_s_first_to_last": 300.0, "events_per_s_from_start": 250.0,
                 "process_cpu_us_per_event": 500.0, "hbase_cpu_us_per_row": 250.0, "peak_rss_mb": 900.0}
    assert figures({"system": "loader", "rows": 1000, "seconds": 0.5, "hbase_cpu_s": 0.02}) == {
        "rows_per_s": 2000.0, "hbase_cpu_us_per_row": 20.0}


def test_figures_refuse_a_run_without_a_span() -> None:
    with pytest.raises(ValueError, match="not after its first"):
        figures(_run("flume", 2.0, 2.0, 1, 1, 1))


def test_summary_medians_ranges_and_ratios() -> None:
    runs = [_run("flume", 1.0, 4.0, 0.5, 0.25, 900.0), _run("flume", 1.0, 2.5, 0.5, 0.25, 1000.0),
            _run("flume", 1.0, 10.0, 0.5, 0.25, 1100.0),
            _run("hbase-ingest", 1.0, 5.5, 1.0, 0.5, 100.0), _run("hbase-ingest", 1.0, 5.5, 1.0, 0.5, 110.0),
            {"system": "loader", "rows": 1000, "seconds": 0.5, "hbase_cpu_s": 0.02}]
    s = summarize(runs)
    assert s["flume"]["events_per_s_first_to_last"] == {"median": 300.0, "min": 100.0, "max": 600.0}
    assert s["flume"]["runs"] == 3 and s["hbase-ingest"]["runs"] == 2
    ratio = s["ratio_hbase_ingest_over_flume"]
    assert ratio["events_per_s_first_to_last"] == pytest.approx(200.0 / 300.0)
    assert ratio["process_cpu_us_per_event"] == pytest.approx(2.0)
    assert ratio["peak_rss_mb"] == pytest.approx(105.0 / 1000.0)
    table = markdown_table(s, 1000, 3)
    assert "| events/s, first write to last | 300 (100-600) | 200 (200-200) | 0.67 | 2,000 (2,000-2,000) |" in table
    assert "| peak RSS, MB | 1,000 (900-1,100) | 105 (100-110) | 0.10 | - |" in table


def test_summary_needs_both_pipelines() -> None:
    with pytest.raises(ValueError, match="no runs of hbase-ingest"):
        summarize([_run("flume", 1.0, 4.0, 0.5, 0.25, 900.0)])


# -- watching a run (real child processes, fake probes) ----------------------------------------------


def test_watch_times_the_first_and_last_write() -> None:
    import subprocess
    import time

    from bench.peer_procs import watch

    counts = iter([0, 0, 40, 70, 100])
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        started = time.perf_counter()

        def probe() -> tuple[int, float]:
            return next(counts), time.perf_counter()
        figs = watch(proc, probe, 100, started, lambda: 0.0, 0.0, tick_s=0.01)
    finally:
        proc.kill()
        proc.wait()
    assert figs.rows == 100 and figs.first_rows == 40
    assert 0 < figs.first_write_s < figs.all_written_s
    assert figs.peak_rss_mb > 0


def test_watch_fails_when_the_process_exits_first() -> None:
    import subprocess
    import time

    from bench.peer_procs import RunFailed, watch

    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(RunFailed, match=r"exited \(status 0\) after 5 of 100 rows"):
        watch(proc, lambda: (5, time.perf_counter()), 100, time.perf_counter(), lambda: 0.0, 0.0, tick_s=0.01)
