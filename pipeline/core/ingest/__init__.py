"""The ingest path's state machines (pure; time is an argument): which offsets may be committed
(``offsets``), each partition's progress and the in-flight budget (``progress``), the region layout
of a table (``regions``) and the per-server batches (``batcher``)."""
