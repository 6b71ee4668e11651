"""``python -m pipeline`` is the same as the ``hbase-ingest`` command.

The guard matters: a scan worker process (``scan --processes N``) re-runs the parent's main module
under the name ``__mp_main__`` before it takes work, and must not start the command again there.
"""

from pipeline.cli import main

if __name__ == "__main__":
    main()
