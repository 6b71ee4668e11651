"""I/O adapters: the only place that imports aiokafka, happybase and thriftpy2."""
