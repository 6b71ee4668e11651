"""HBase's ``AccessDeniedException`` as :class:`~pipeline.errors.HBaseAuthError` on every path
(:mod:`connectors.hbase.denied`): the Thrift1 ``IOError`` and Thrift2 ``TIOError`` texts, a native ``Multi``
action's exception (:func:`~connectors.hbase.native.failures.error_for`) and a native call's exception
(:func:`~connectors.hbase.native.connection.remote_error`). The texts are HBase 2.6.1's, as the Kerberized
stack's AccessController wrote them."""

from __future__ import annotations

import pickle

import pytest

from connectors.hbase.denied import ACCESS_DENIED_CLASS, access_denied
from connectors.hbase.errors import translate
from connectors.hbase.native.connection import remote_error
from connectors.hbase.native.failures import Failed, error_for
from connectors.hbase.native.wire import RemoteException, Response
from pipeline.errors import HBaseAuthError, HBaseRequestError

READ = "Insufficient permissions for user 'stranger' (table=orders, action=READ)"
WRITE = ("Insufficient permissions (user=stranger@HBASE-INGEST.TEST, scope=default:orders, family=d:v, "
         "params=[table=default:orders,family=d:v],action=WRITE)")
TRACE = "\n\tat org.apache.hadoop.hbase.security.access.AccessController.prePut(AccessController.java:1409)"


class TIOError(Exception):
    """The Thrift2 gateway's exception: the Java text, and ``canRetry``."""

    def __init__(self, message: bytes, canRetry: bool | None) -> None:
        super().__init__(message)
        self.message = message
        self.canRetry = canRetry


class IOError(Exception):
    def __init__(self, message: bytes) -> None:
        super().__init__(message)
        self.message = message


def _assert_names_all(err: BaseException, user: str, action: str, table: str = "orders") -> None:
    assert isinstance(err, HBaseAuthError) and not err.retryable, err
    text = str(err)
    assert f"HBase refused user {user!r}: the {action} permission on table {table!r} is missing" in text, text
    assert f"grant '{user.partition('@')[0]}', '{action[0]}', '{table}'" in text, text
    assert (err.user, err.action, err.table) == (user, action, table)


def test_both_wordings_are_read() -> None:
    read = access_denied(f"{ACCESS_DENIED_CLASS}: {READ}{TRACE}")
    assert read is not None and (read.user, read.action, read.table) == ("stranger", "READ", "orders")
    write = access_denied(WRITE)
    assert write is not None and (write.user, write.action, write.table) == (
        "stranger@HBASE-INGEST.TEST", "WRITE", "orders")
    wide = access_denied("Insufficient permissions for user 'stranger' (global, action=CREATE)")
    assert wide is not None and (wide.scope, wide.table) == ("global", None)
    ns = access_denied("Insufficient permissions for user 'ingest' (namespace=default, action=CREATE)")
    assert ns is not None and ns.scope == "namespace 'default'"
    assert access_denied("java.io.IOException: something transient") is None


@pytest.mark.parametrize("exc", [
    TIOError(f"Failed 1 action: {ACCESS_DENIED_CLASS}: {WRITE}{TRACE}\n: 1 time, servers with issues: "
             "localhost,16720,1".encode(), True),  # a Thrift2 write: HBase's summary of the batch
    TIOError(WRITE.encode(), False),  # the exception's own message, without its class
    IOError(f"{ACCESS_DENIED_CLASS}: {WRITE}{TRACE}".encode()),  # Thrift1
])
def test_thrift_refusals_of_a_write(exc: Exception) -> None:
    err = translate(exc, "orders", "write batch")
    _assert_names_all(err, "stranger@HBASE-INGEST.TEST", "WRITE")
    assert str(err).startswith("write batch on table 'orders': ")


def test_a_thrift_refusal_of_a_scan() -> None:
    err = translate(TIOError(f"{ACCESS_DENIED_CLASS}: {READ}{TRACE}".encode(), False), "orders", "scan")
    _assert_names_all(err, "stranger", "READ")


def test_a_native_multi_refusal_is_an_auth_error_not_a_refused_batch() -> None:
    failures = [Failed(i, b"orders,,1.abc.", ACCESS_DENIED_CLASS, WRITE) for i in range(3)]
    err = error_for("orders", failures)
    # an HBaseRequestError would have the writer dead-letter valid events as refused by HBase
    assert not isinstance(err, HBaseRequestError)
    _assert_names_all(err, "stranger@HBASE-INGEST.TEST", "WRITE")
    assert str(err).startswith("3 action(s) on table 'orders': ")
    again = pickle.loads(pickle.dumps(err))  # errors cross from scan worker processes
    assert isinstance(err, HBaseAuthError) and isinstance(again, HBaseAuthError)
    assert (type(again), again.user, again.action, str(again)) == (HBaseAuthError, err.user, "WRITE", str(err))


def test_a_native_call_refusal() -> None:
    exc = RemoteException(ACCESS_DENIED_CLASS, f"{ACCESS_DENIED_CLASS}: {READ}{TRACE}")
    err = remote_error(Response(7, exc, b"", b""), "localhost:16720", "Scan")
    _assert_names_all(err, "stranger", "READ")
    assert str(err).startswith("Scan on localhost:16720: ")
    bare = RemoteException(ACCESS_DENIED_CLASS, f"{ACCESS_DENIED_CLASS}: Authentication is required")
    refused = remote_error(Response(9, bare, b"", b""), "localhost:16720", "Scan")
    assert isinstance(refused, HBaseAuthError) and refused.user is None, refused
    assert str(refused) == ("Scan on localhost:16720: HBase refused the call (AccessDeniedException: "
                            "org.apache.hadoop.hbase.security.AccessDeniedException: Authentication is required)")
    other = RemoteException("org.apache.hadoop.hbase.DoNotRetryIOException", "DoNotRetryIOException: bad")
    assert isinstance(remote_error(Response(8, other, b"", b""), "localhost:16720", "Scan"), HBaseRequestError)


def test_a_create_refused_on_the_namespace_names_the_namespace_and_its_grant() -> None:
    text = ("Insufficient permissions (user=stranger, scope=default, params=[namespace=default,"
            "table=default:seller_1,family=o],action=CREATE)")
    denial = access_denied(text, "seller_1")
    assert denial is not None and denial.scope == "namespace 'default'" and denial.table is None
    assert denial.grant_hint() == "grant 'stranger', 'C', '@default'"
