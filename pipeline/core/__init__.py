"""Pure logic of the ingest path: data in, decisions out. No I/O, no clock calls (time is an
argument), no aiokafka/happybase/anyio/asyncio imports.

- ``model``: Kafka record origins and HBase mutations.
- ``offsets``: which offset may be committed once every derived write is acknowledged.
- ``regions``: the region layout of a table and row -> region lookup.
- ``batcher``: per-region batches sealed on rows, bytes, same-row conflicts and age.
- ``backoff``: exponential backoff with jitter.
- ``ratelimit``: token bucket.
- ``skew``: sliding-window write counts per region and their skew.
- ``merge``: k-way merge of sorted streams.
"""

from pipeline.core.backoff import Backoff, Jitter
from pipeline.core.batcher import Batch, BatcherStatistics, RegionBatcher, SealReason
from pipeline.core.merge import Descending, PageMerge, heap_merge, merge_pieces
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.offsets import OffsetTracker, PartitionOffsets, TrackerStatistics
from pipeline.core.ratelimit import RateLimiter, RateLimiterStatistics
from pipeline.core.regions import Region, RegionMap
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
