"""Translation of the Thrift gateways' exceptions into the project's errors (connectors.hbase.errors),
for the shapes HBase's Thrift2 gateway gives (seen against the local stack): a missing table's
``TIOError`` names only the table."""

from __future__ import annotations

import ssl

import pytest

from connectors.hbase.errors import PROGRAM_ERRORS, map_exceptions, translate
from pipeline.errors import HBaseRequestError, HBaseUnavailable, TableNotFound


class TIOError(Exception):
    """The shape of the Thrift2 gateway's exception: the Java message only, and ``canRetry``."""

    def __init__(self, message: bytes, canRetry: bool | None) -> None:
        super().__init__(message)
        self.message = message
        self.canRetry = canRetry


def test_a_thrift2_error_naming_only_the_table_is_table_not_found() -> None:
    gone = translate(TIOError(b"dev_logs", False), "logs", "scan")  # the full name carries the prefix
    assert isinstance(gone, TableNotFound) and not gone.retryable
    assert str(gone) == "scan on table 'logs': table does not exist: dev_logs"
    assert isinstance(translate(TIOError(b"logs is disabled.", False), "logs"), HBaseUnavailable)
    assert isinstance(translate(TIOError(b"logs", True), "logs"), HBaseUnavailable)  # HBase says a retry may help
    assert isinstance(translate(TIOError(b"other_table", False), "logs"), HBaseUnavailable)
    assert isinstance(translate(TIOError(b"logs", False), None), HBaseUnavailable)  # no table to compare
    # a write: HBase's summary of its retries, every cause being the table's name, no server reached
    summary = b"Failed 2 actions: dev_logs: 2 times, servers with issues: null"
    assert isinstance(translate(TIOError(summary, True), "logs", "write batch"), TableNotFound)
    for other in (b"Failed 1 action: dev_logs: 1 time, servers with issues: rs1:16020",
                  b"Failed 1 action: RegionTooBusyException: 1 time, servers with issues: null"):
        assert isinstance(translate(TIOError(other, True), "logs", "write batch"), HBaseUnavailable)


@pytest.mark.parametrize("error", [cls("a bug of ours") for cls in PROGRAM_ERRORS] + [KeyError("k"), UnicodeError("u")])
def test_errors_of_our_own_code_pass_through_untranslated(error: Exception) -> None:
    # translated, they would be HBaseRequestError, and the writer would dead-letter valid events as refused
    with pytest.raises(type(error)) as caught, map_exceptions("t", "write batch"):
        raise error
    assert caught.value is error


def test_an_io_failure_that_is_also_a_value_error_is_translated() -> None:
    # ssl.SSLCertVerificationError is an OSError and a ValueError: a gateway's certificate, not a bug of ours
    error = ssl.SSLCertVerificationError(1, "certificate verify failed: unable to get local issuer certificate")
    assert isinstance(error, ValueError)
    with pytest.raises(HBaseUnavailable, match="certificate verify failed") as caught, \
            map_exceptions("t", "write batch"):
        raise error
    assert caught.value.__cause__ is error


def test_what_hbase_and_thrift_raise_is_still_translated() -> None:
    with pytest.raises(HBaseUnavailable), map_exceptions("t", "write batch"):
        raise TIOError(b"java.io.IOException: something transient", True)

    class TApplicationException(Exception):  # thriftpy2's: the gateway failed to process the call
        pass

    with pytest.raises(HBaseRequestError, match="TApplicationException: Internal error processing"), \
            map_exceptions("t", "write batch"):
        raise TApplicationException("Internal error processing mutateRows")

    # a read the gateway failed to process (a region server it asked was frozen): nothing to refuse, retried
    for method in ("getTableRegions", "getColumnDescriptors", "scannerOpenWithScan", "isTableEnabled", "exists",
                   "openScanner"):
        with pytest.raises(HBaseUnavailable, match=f"failed to process a read: Internal error processing {method}"), \
                map_exceptions("t", "list regions"):
            raise TApplicationException(f"Internal error processing {method}")
