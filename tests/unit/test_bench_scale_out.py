"""The scale-out benchmark's profile: what its worker processes read must be the settings it meant."""

from __future__ import annotations

from pathlib import Path

from bench.bench_scale_out import scale_settings, to_toml
from devstack import LocalStack
from devstack.settings import StackSettings
from pipeline.settings import load_settings


def test_the_profile_written_for_the_workers_reads_back_as_the_same_settings(tmp_path: Path) -> None:
    cluster = LocalStack(StackSettings(state_dir=tmp_path / "state", region_servers=2, gateways=2))
    settings = scale_settings(cluster, 12, ["localhost:16020", None])
    path = tmp_path / "scale.toml"
    path.write_text(to_toml(settings.model_dump(mode="json", exclude_unset=True, exclude_none=True)))
    back = load_settings(path)
    assert back.routes == settings.routes
    assert back.tables == settings.tables
    assert back.writer == settings.writer
    assert back.kafka.dead_letter_topic == "bench-scale-dlq"
    assert [(g.host, g.port, g.thrift2_port, g.server) for g in back.hbase.gateways] == [
        ("127.0.0.1", cluster.gateways[0].thrift_port, cluster.gateways[0].thrift2_port, "localhost:16020"),
        ("127.0.0.1", cluster.gateways[1].thrift_port, cluster.gateways[1].thrift2_port, None)]
    assert back.hbase.pool_size == settings.hbase.pool_size == 8
