"""hbase-ingest: Kafka -> rowkey designs -> per-server batches -> HBase, and fan-out reads back.

Layers (data flows one way):

- ``pipeline.rowkey`` and ``pipeline.core``: pure logic, no I/O, no clock calls.
- ``connectors``: the only code that imports aiokafka, happybase and thriftpy2.
- ``pipeline.runtime``: async orchestration (worker, reader, backfill, metrics) on top of both.
- ``pipeline.cli``: the composition root: settings -> connectors -> runtime.
"""

__version__ = "0.1.0"
