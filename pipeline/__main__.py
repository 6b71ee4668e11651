"""``python -m pipeline`` is the same as the ``hbase-ingest`` command."""

from pipeline.cli import main

main()
