"""What a Java exception class named by the server means for the caller. Pure: no I/O.

Three outcomes for a failed action:

- *relocate*: the region is elsewhere (``NotServingRegionException``, ``RegionMovedException``, a
  connection lost to its server): refresh the table's regions, retry the failed actions only;
- *back off*: the server is busy or the region is opening: retry the failed actions after a pause;
- *refuse*: anything else (``NoSuchColumnFamilyException``, ``DoNotRetryIOException``...): retrying
  cannot help; the caller gets an :class:`~pipeline.errors.HBaseRequestError`, or an
  :class:`~pipeline.errors.HBaseAuthError` for an ``AccessDeniedException`` (a permission the user lacks: not
  the mutations' fault, none of them is to be dead-lettered).

Errors raised carry ``failures``: a list of :class:`Failed` naming the batch index, region and
exception class of every action that did not succeed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from connectors.hbase.denied import ACCESS_DENIED_CLASS, Denial, access_denied, denied_error
from pipeline.errors import (
    HBaseError,
    HBaseRequestError,
    HBaseUnavailable,
    RegionMapStale,
    TableNotFound,
)

__all__ = [
    "BACK_OFF", "CONNECTION_LOST", "META_UNREADABLE", "RELOCATE", "REQUEST_TOO_LARGE", "UNASSIGNED", "Failed",
    "error_for", "short_name",
]

CONNECTION_LOST = "connection-lost"
#: no online region holds the row (a hole in meta while a region is in transition)
UNASSIGNED = "region-unassigned"
#: one mutation larger than a request may be (the client's ``max_request_bytes``): never sent, not retryable
REQUEST_TOO_LARGE = "request-too-large"
#: the table's regions could not be re-read from hbase:meta (its server busy, moving or unreachable)
META_UNREADABLE = "meta-unreadable"
RELOCATE = frozenset({
    "org.apache.hadoop.hbase.NotServingRegionException",
    "org.apache.hadoop.hbase.exceptions.RegionMovedException",
    "org.apache.hadoop.hbase.regionserver.RegionServerStoppedException",
    "org.apache.hadoop.hbase.regionserver.RegionServerAbortedException",
    "org.apache.hadoop.hbase.ipc.ServerNotRunningYetException",
    CONNECTION_LOST,
    UNASSIGNED,
    META_UNREADABLE,
})
BACK_OFF = frozenset({
    "org.apache.hadoop.hbase.RegionTooBusyException",
    "org.apache.hadoop.hbase.CallQueueTooBigException",
    "org.apache.hadoop.hbase.ipc.ServerTooBusyException",
    "org.apache.hadoop.hbase.exceptions.RegionOpeningException",
    "org.apache.hadoop.hbase.quotas.RpcThrottlingException",
    "org.apache.hadoop.hbase.RetryImmediatelyException",
    "org.apache.hadoop.hbase.PleaseHoldException",
    "org.apache.hadoop.hbase.ipc.CallTimeoutException",
})
_TABLE_GONE = frozenset({
    "org.apache.hadoop.hbase.TableNotFoundException",
    "org.apache.hadoop.hbase.TableNotEnabledException",
})


@dataclass(frozen=True, slots=True)
class Failed:
    """One action that failed: its position in the caller's batch (0-based), its region's name and
    the server's exception class and message."""

    index: int
    region: bytes
    java_class: str
    message: str

    @property
    def relocate(self) -> bool:
        return self.java_class in RELOCATE

    @property
    def retryable(self) -> bool:
        return self.java_class in RELOCATE or self.java_class in BACK_OFF


def short_name(java_class: str) -> str:
    """``org.apache.hadoop.hbase.NotServingRegionException`` -> ``NotServingRegionException``."""
    return java_class.rpartition(".")[2]


def _denial(failed: Failed, table: str) -> Denial | None:
    if failed.java_class != ACCESS_DENIED_CLASS:
        return None
    return access_denied(f"{failed.java_class}: {failed.message}", table)


def error_for(table: str, failures: Sequence[Failed], *, exhausted: bool = False) -> HBaseError:
    """The error to raise for ``failures`` (not empty): the first non-retryable one decides its type
    (``HBaseRequestError``, ``TableNotFound``, ``HBaseAuthError``); when every failure is retryable
    (``exhausted``: retries ran out) it is ``RegionMapStale`` (relocations) or ``HBaseUnavailable`` (busy servers). The
    message names the table, the first failure's region and exception, and how many actions failed;
    the error's ``failures`` attribute lists them all."""
    fatal = [f for f in failures if not f.retryable]
    first = fatal[0] if fatal else failures[0]
    region = first.region.decode(errors="replace")
    what = (f"{len(failures)} action(s) failed on table {table!r}; first: region {region!r}: "
            f"{first.java_class}: {first.message}")
    err: HBaseError
    if fatal and first.java_class in _TABLE_GONE:
        err = TableNotFound(what, table=table)
    elif fatal and (denial := _denial(first, table)) is not None:
        err = denied_error(denial, f"{len(failures)} action(s) on table {table!r}", table)
    elif fatal:  # the actions not in ``failures`` were applied
        err = HBaseRequestError(what, table=table, unapplied=tuple(sorted({f.index for f in failures})))
    elif any(f.relocate for f in failures):
        err = RegionMapStale(("retries exhausted: " if exhausted else "") + what, table=table)
    else:
        err = HBaseUnavailable(("retries exhausted: " if exhausted else "") + what, table=table)
    vars(err)["failures"] = list(failures)  # an extra field (pickled with the error) for a caller retrying only these
    return err
