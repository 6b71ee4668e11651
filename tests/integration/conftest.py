from collections.abc import Iterator
from typing import Any

import pytest

from devstack import LocalStack
from devstack.kerberos import KerberosPart
from devstack.krb_kafka import SsoListener
from devstack.settings import StackSettings
from tests.integration.reader_support import design_tables
from tests.integration.shown import SHOWN


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The lines the tests showed (:mod:`tests.integration.shown`), past pytest's capture of passing tests."""
    if SHOWN:
        terminalreporter.section("shown by the tests")
        for text in SHOWN:
            terminalreporter.write_line(text)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def reader_tables(stack: LocalStack) -> Iterator[dict[str, str]]:
    """One table per reader-test design (tests.integration.reader_support.DESIGNS) for a module."""
    yield from design_tables(stack)


@pytest.fixture(scope="session")
def kerberos_stack(stack: LocalStack) -> LocalStack:
    """The stack with its Kerberos part (``stack up --kerberos``): a KDC and a Kerberized HBase whose gateways
    ``.kerberos`` describes. When the stack runs without it, this adds it (nothing else restarts)."""
    with_kerberos = LocalStack(StackSettings(kerberos=True))
    with_kerberos.up()
    assert with_kerberos.kerberos is not None
    return with_kerberos


@pytest.fixture
def krb(kerberos_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> KerberosPart:
    """The Kerberized stack's part, with ``KRB5_CONFIG`` pointing at its realm for the test."""
    k = kerberos_stack.kerberos
    assert k is not None
    monkeypatch.setenv("KRB5_CONFIG", str(k.krb5_conf))
    return k


@pytest.fixture(scope="module")
def sso(kerberos_stack: LocalStack) -> SsoListener:
    """Kafka's SSO listener (GSSAPI, OAUTHBEARER over TLS); a stack running without ``--secure`` gets it
    (restarting Kafka only)."""
    both = LocalStack(StackSettings(secure=True, kerberos=True))
    both.up()
    assert both.sso_listener is not None and both.sso
    return both.sso_listener
