"""The pure parts of Flink as the peer benchmark's peer: the job's SQL and Flink settings, its row
keys, the classpath pins (against infra/flink/pom.xml), its command line, the figures and table
with Flink as the main peer, and ``--systems``."""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from bench.bench_peer import REGIONS, SYSTEMS, flink_tuning, parse_systems
from bench.peer_flink import (
    ABSENT,
    COUNTING_CONNECTION,
    FLINK_HBASE_VERSION,
    FLINK_JDK17,
    FLINK_KAFKA_VERSION,
    FLINK_VERSION,
    JOB_CLASS,
    PINS,
    FlinkJob,
    config_properties,
    flink_classpath,
    flink_command,
    flink_config,
    jar_version,
    job_sql,
    row_key,
    sql_literal,
)
from bench.peer_flume import split_keys
from bench.peer_summary import figures, markdown_table, summarize
from pipeline.core.examples import generate

INFRA = Path(__file__).resolve().parents[2] / "infra" / "flink"
JOB = FlinkJob(bootstrap="127.0.0.1:9092", topic="t1", group="g1", table="tb1", zookeeper_quorum="127.0.0.1:2181")


def _statements(sql: str) -> list[str]:
    """Split as FlinkPeerJob.java does: at ';' followed by the end of a line or of the text."""
    return [s for s in re.split(r";\s*(?:\r?\n|$)", sql) if s.strip()]


def _options(statement: str) -> dict[str, str]:
    return {k.replace("''", "'"): v.replace("''", "'")
            for k, v in re.findall(r"'((?:[^']|'')*)' = '((?:[^']|'')*)'", statement)}


# -- the job's SQL -----------------------------------------------------------------------------------


def test_job_is_a_kafka_table_an_hbase_table_and_one_insert() -> None:
    source, sink, insert = _statements(job_sql(JOB))
    assert source.startswith("CREATE TABLE src") and sink.startswith("CREATE TABLE sink")
    assert insert.startswith("INSERT INTO sink") and "FROM src" in insert
    assert _options(source) == {
        "connector": "kafka", "topic": "t1", "properties.bootstrap.servers": "127.0.0.1:9092",
        "properties.group.id": "g1", "scan.startup.mode": "earliest-offset", "format": "json",
        "properties.max.poll.records": "5000"}


def test_sink_buffers_like_hbase_ingest_batches_and_counts_rows() -> None:
    _, sink, _ = _statements(job_sql(JOB))
    opts = _options(sink)
    assert opts["connector"] == "hbase-2.2" and opts["table-name"] == "tb1"
    assert opts["zookeeper.quorum"] == "127.0.0.1:2181"
    assert opts["sink.buffer-flush.max-rows"] == "2000"
    assert opts["sink.buffer-flush.max-size"] == "4mb"
    assert opts["sink.buffer-flush.interval"] == "200ms"
    assert opts["properties.hbase.client.connection.impl"] == COUNTING_CONNECTION
    assert "l ROW<v STRING, lv STRING, m STRING>" in sink and "PRIMARY KEY (rowkey)" in sink


def test_insert_writes_the_three_design_cells_under_the_row_key() -> None:
    *_, insert = _statements(job_sql(JOB))
    assert "CONCAT(hostname, '|', log_event, '|', `timestamp`)" in insert
    assert "ROW(`value`, `level`, message)" in insert  # l:v, l:lv, l:m in the sink's ROW order


def test_counting_connection_is_a_class_of_the_job_source() -> None:
    source = (INFRA / f"{JOB_CLASS}.java").read_text()
    outer, inner = COUNTING_CONNECTION.split("$")
    assert outer == JOB_CLASS and f"public class {JOB_CLASS} " in source
    assert f"public static final class {inner} implements Connection" in source
    # the constructor HBase's ConnectionFactory looks up by reflection
    assert f"public {inner}(org.apache.hadoop.conf.Configuration conf, ExecutorService pool, User user)" in source


def test_quotes_in_names_are_doubled_and_unsafe_values_refused() -> None:
    assert sql_literal("it's") == "'it''s'"
    sql = job_sql(FlinkJob("b:1", "top'ic", "g", "t", "z:1"))
    assert _options(_statements(sql)[0])["topic"] == "top'ic"
    for bad in ("", "  ", "a;b", "a\nb"):
        with pytest.raises(ValueError, match=r"empty|line break"):
            sql_literal(bad)
    with pytest.raises(ValueError, match="empty"):
        job_sql(FlinkJob("b:1", "t", "", "t", "z:1"))
    with pytest.raises(ValueError, match="identifier"):
        job_sql(FlinkJob("b:1", "t", "g", "t", "z:1", family="l; DROP"))


# -- row keys ----------------------------------------------------------------------------------------


def test_row_key_is_host_event_and_the_timestamps_json_text() -> None:
    _, event = next(iter(generate("logs", 1)))
    key = row_key(event)
    body = orjson.dumps(event)
    ts_text = re.search(rb'"timestamp":(\d+)', body)
    assert ts_text is not None
    assert key == event["hostname"].encode() + b"|" + event["log_event"].encode() + b"|" + ts_text.group(1)


def test_row_keys_are_unique_per_event_and_split_keys_use_every_region() -> None:
    events = [e for _, e in generate("logs", 20_000)]
    keys = [row_key(e) for e in events]
    assert len(set(keys)) == len(keys)  # the sink deduplicates by row key: a repeat would lose a row
    splits = split_keys(keys, REGIONS)
    counts = [0] * REGIONS
    for k in keys:
        counts[sum(k >= s for s in splits)] += 1
    assert min(counts) > len(keys) / REGIONS / 2


def test_row_key_needs_every_field() -> None:
    with pytest.raises(KeyError):
        row_key({"hostname": "h", "timestamp": 1})


# -- Flink settings and command ----------------------------------------------------------------------


def test_flink_settings() -> None:
    conf = flink_config(JOB)
    assert conf["parallelism.default"] == "2" and conf["taskmanager.numberOfTaskSlots"] == "2"
    assert conf["execution.checkpointing.interval"] == "5 s"
    assert conf["execution.checkpointing.mode"] == "AT_LEAST_ONCE"
    assert conf["rest.bind-port"] == "0"  # never a fixed port another process may hold
    text = config_properties(conf)
    assert text.splitlines() == sorted(text.splitlines()) and "parallelism.default=2" in text.splitlines()


@pytest.mark.parametrize("conf", [{"a": ""}, {"a": "x\ny"}, {"a": "c:\\tmp"}])
def test_properties_refuse_what_needs_escaping(conf: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="a="):
        config_properties(conf)


def test_command_has_heap_flags_once_log4j_and_the_job_arguments() -> None:
    hbase_flags = ["--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-modules", "jdk.unsupported"]
    cmd = flink_command([Path("/c"), Path("/l/a-1.jar")], Path("f.properties"), Path("j.sql"),
                        Path("log4j2.properties"), 1024, hbase_flags)
    assert cmd[:2] == ["java", "-Xmx1024m"]
    assert cmd[-3:] == [JOB_CLASS, "f.properties", "j.sql"]
    assert cmd[cmd.index("-cp") + 1] == "/c:/l/a-1.jar"
    assert cmd.count("--add-opens=java.base/java.lang=ALL-UNNAMED") == 1
    assert all(f in cmd for f in FLINK_JDK17)
    assert "-Dlog4j2.configurationFile=log4j2.properties" in cmd


# -- the classpath pins ------------------------------------------------------------------------------


def _jars(*names: str) -> list[Path]:
    pinned = [f"{a}-{v}.jar" for a, v in PINS.items()]
    return [Path("/lib") / n for n in (*pinned, "flink-core-1.19.3.jar", *names)]


def test_classpath_is_the_job_then_the_jars_sorted() -> None:
    jars = _jars("asm-3.1.jar", "asm-5.0.4.jar")  # two groups' asm: allowed
    cp = flink_classpath(list(reversed(jars)), Path("/job"))
    assert cp[0] == Path("/job") and cp[1:] == sorted(jars, key=lambda p: p.name)


@pytest.mark.parametrize(("swap", "message"), [
    (("commons-compress-1.26.0.jar", "commons-compress-1.4.1.jar"), "commons-compress is 1.4.1 .* expected 1.26.0"),
    (("commons-io-2.15.1.jar", None), "commons-io 2.15.1 is missing"),
    (("zookeeper-3.4.10.jar", "zookeeper-3.4.6.jar"), "zookeeper is 3.4.6"),
])
def test_classpath_refuses_a_broken_pin(swap: tuple[str, str | None], message: str) -> None:
    old, new = swap
    jars = [j for j in _jars() if j.name != old] + ([Path("/lib") / new] if new else [])
    with pytest.raises(ValueError, match=message):
        flink_classpath(jars, Path("/job"))


def test_classpath_refuses_two_versions_of_a_pin_and_hadoops_log4j() -> None:
    with pytest.raises(ValueError, match="two versions of commons-compress"):
        flink_classpath(_jars("commons-compress-1.4.1.jar"), Path("/job"))
    for name in ("log4j-1.2.17.jar", "slf4j-log4j12-1.7.10.jar"):
        with pytest.raises(ValueError, match="must not be on Flink's classpath"):
            flink_classpath(_jars(name), Path("/job"))


def test_jar_version() -> None:
    assert jar_version("commons-compress-1.26.0.jar") == "1.26.0"
    assert jar_version("guava-32.1.2-jre.jar") == "32.1.2-jre"
    with pytest.raises(ValueError, match="classifier"):
        jar_version("netty-transport-native-epoll-4.1.70.Final-linux-x86_64.jar")


def test_pom_pins_what_the_classpath_check_expects() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(INFRA / "pom.xml").getroot()
    found = pom.find("m:properties", ns)
    assert found is not None, "the pom has no <properties>"
    props = {el.tag.split("}")[1]: el.text for el in found}
    assert props["flink.version"] == FLINK_VERSION
    assert props["flink.kafka.version"] == FLINK_KAFKA_VERSION
    assert props["flink.hbase.version"] == FLINK_HBASE_VERSION

    def version(dep: ET.Element) -> str:
        text = dep.findtext("m:version", namespaces=ns) or ""
        return props.get(text.removeprefix("${").removesuffix("}"), text) or ""

    managed = {d.findtext("m:artifactId", namespaces=ns): version(d)
               for d in pom.iterfind("m:dependencyManagement/m:dependencies/m:dependency", ns)}
    direct = {d.findtext("m:artifactId", namespaces=ns): version(d)
              for d in pom.iterfind("m:dependencies/m:dependency", ns)}
    for artifact, want in PINS.items():
        assert (managed | direct).get(artifact) == want, artifact
    excluded = {e.findtext("m:artifactId", namespaces=ns) for e in pom.iterfind(".//m:exclusion", ns)}
    assert excluded >= ABSENT


# -- figures with Flink as the main peer -------------------------------------------------------------


def _run(system: str, first: float, last: float, rss: float) -> dict[str, object]:
    return {"system": system, "rows": 1000, "first_rows": 100, "first_write_s": first, "all_written_s": last,
            "process_cpu_s": 0.5, "process_cpu_writing_s": 0.09, "hbase_cpu_s": 0.25, "peak_rss_mb": rss,
            "offsets_committed_s": last + 10}


def test_figures_after_the_first_write_and_until_committed() -> None:
    f = figures(_run("flink", 1.0, 4.0, 900.0))
    assert f["process_cpu_us_per_event_after_first_write"] == pytest.approx(100.0)  # 0.09 s over 900 rows
    assert f["seconds_to_first_write"] == 1.0 and f["seconds_to_offsets_committed"] == 14.0


def test_flink_is_the_main_peer_and_flume_a_column_beside() -> None:
    runs = [_run("flink", 1.0, 4.0, 1000.0), _run("flume", 1.0, 10.0, 1200.0),
            _run("hbase-ingest", 1.0, 2.5, 100.0)]
    s = summarize(runs)
    assert s["ratio_hbase_ingest_over_flink"]["events_per_s_first_to_last"] == pytest.approx(2.0)
    assert s["ratio_hbase_ingest_over_flume"]["peak_rss_mb"] == pytest.approx(100.0 / 1200.0)
    table = markdown_table(s, 1000, 1)
    lines = table.splitlines()
    assert lines[0] == ("| 1,000 events, 1 runs each | Flink | hbase-ingest | hbase-ingest / Flink | Flume "
                        "| BufferedMutator loader |")
    assert "| peak RSS, MB | 1,000 (1,000-1,000) | 100 (100-100) | 0.10 | 1,200 (1,200-1,200) | - |" in lines
    assert "| seconds until offsets committed to the end | 14.0 (14.0-14.0) | 12.5 (12.5-12.5) | 0.89 | " \
           "20.0 (20.0-20.0) | - |" in lines


def test_summary_of_flink_and_hbase_ingest_alone() -> None:
    s = summarize([_run("flink", 1.0, 4.0, 1000.0), _run("hbase-ingest", 1.0, 2.5, 100.0)])
    assert "flume" not in s and "ratio_hbase_ingest_over_flume" not in s
    assert "| Flink | hbase-ingest | hbase-ingest / Flink | BufferedMutator loader |" in markdown_table(s, 1000, 1)
    with pytest.raises(ValueError, match="no runs of flink or flume"):
        summarize([_run("hbase-ingest", 1.0, 2.5, 100.0)])


# -- --systems ---------------------------------------------------------------------------------------


def test_systems_default_is_all_four_in_run_order() -> None:
    assert parse_systems(",".join(SYSTEMS)) == ("flink", "flume", "hbase-ingest", "loader")
    assert parse_systems("hbase-ingest, flink") == ("flink", "hbase-ingest")


@pytest.mark.parametrize(("text", "message"), [
    ("flink,spark,hbase-ingest", "unknown systems spark"),
    ("flink,flume", "needs hbase-ingest"),
    ("hbase-ingest,loader", "at least one of flink, flume"),
])
def test_systems_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_systems(text)


def test_flink_tuning_takes_only_the_options_given() -> None:
    args = argparse.Namespace(flink_parallelism=4, flink_flush_rows=None, flink_flush_size="16mb")
    assert flink_tuning(args) == {"parallelism": 4, "flush_max_size": "16mb"}
    assert flink_tuning(argparse.Namespace()) == {}
