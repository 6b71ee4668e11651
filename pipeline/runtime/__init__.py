"""Async orchestration: worker, reader, backfill, metrics. Drives the pure logic in pipeline.core and
pipeline.rowkey through connectors."""
