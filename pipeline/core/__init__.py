"""Pure logic of the ingest path: data in, decisions out. No I/O, no clock calls (time is an
argument), no aiokafka/happybase/anyio/asyncio imports.

- ``model``: Kafka record origins and HBase mutations.
- ``records``: record decoding (formats, envelopes, dead-letter headers).
- ``routes``: the routes: the reference, the fast forms, the router.
- ``ingest``: the state machines: offsets, partition progress, region maps, batches.
- ``backoff``: exponential backoff with jitter.
- ``ratelimit``: token bucket.
- ``skew``: sliding-window write counts per region and their skew.
- ``merge``: k-way merge of sorted streams.
"""

from pipeline.core.backoff import Backoff, Jitter
from pipeline.core.ingest.batcher import Batch, BatcherStatistics, RegionBatcher, SealReason
from pipeline.core.ingest.offsets import OffsetTracker, PartitionOffsets, TrackerStatistics
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.merge import Descending, PageMerge, heap_merge, merge_pieces
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.ratelimit import RateLimiter, RateLimiterStatistics
from pipeline.core.skew import SkewWindow

__all__ = [
    "Backoff",
    "Batch",
    "BatcherStatistics",
    "Descending",
    "Jitter",
    "Mutation",
    "MutationKind",
    "OffsetTracker",
    "Origin",
    "PageMerge",
    "PartitionOffsets",
    "RateLimiter",
    "RateLimiterStatistics",
    "Region",
    "RegionBatcher",
    "RegionMap",
    "SealReason",
    "SkewWindow",
    "TopicPartition",
    "TrackerStatistics",
    "heap_merge",
    "merge_pieces",
]
