"""The ingest path: the worker, its batch writer and dead letters."""
