"""In-memory twins of the Kafka and HBase adapters, for fast runtime tests (never in place of the
integration tests against the real servers). They satisfy the same ports (:mod:`pipeline.ports`) and
behave like the real adapters where runtime can tell: see each module's docstring."""

from .hbase import MemoryCell, MemoryHBase
from .kafka import MemoryBroker, MemoryRecord, MemorySink, MemorySource

__all__ = ["MemoryBroker", "MemoryCell", "MemoryHBase", "MemoryRecord", "MemorySink", "MemorySource"]
