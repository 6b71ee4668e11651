"""Shared fixtures. Integration tests use the real local stack, started here when it is not running."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from devstack import LocalStack
from devstack.secure import SecureListener
from devstack.settings import StackSettings
from pipeline.settings import HBaseSettings, KafkaSettings


@pytest.fixture(scope="session")
def stack() -> LocalStack:
    """The real Kafka + HBase stack; `stack up` is idempotent and returns at once when it runs."""
    local = LocalStack(StackSettings())
    local.up()
    return local


@pytest.fixture(scope="session")
def secure_listener(stack: LocalStack) -> SecureListener:
    """The stack's SASL_SSL listener (``stack up --secure``, as ``make test`` starts it): its port, CA file
    and users' password files. When the stack runs without it, this adds it (restarting Kafka only)."""
    secured = LocalStack(StackSettings(secure=True))
    secured.up()
    return secured.secure_listener


@pytest.fixture(scope="session")
def cdc_stack(stack: LocalStack) -> LocalStack:
    """The stack with its CDC part (``stack up --cdc``, as ``make test`` starts it): PostgreSQL and Kafka
    Connect with Debezium (``.cdc``). When the stack runs without them, this adds them (nothing else restarts)."""
    with_cdc = LocalStack(StackSettings(cdc=True))
    with_cdc.up()
    return with_cdc


@pytest.fixture(scope="session")
def registry_stack(stack: LocalStack) -> LocalStack:
    """The stack with its schema registry and CDC part (``stack up --cdc --registry``, as ``make test`` starts
    it): the Confluent-compatible API at ``.registry_url``. When the stack runs without them, this adds them
    (nothing else restarts)."""
    with_registry = LocalStack(StackSettings(cdc=True, registry=True))
    with_registry.up()
    return with_registry


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def kafka_settings(stack: LocalStack) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=stack.bootstrap)


@pytest.fixture
def hbase_settings(stack: LocalStack) -> HBaseSettings:
    return HBaseSettings(port=stack.settings.thrift_port, thrift2_port=stack.settings.thrift2_port,
                         timeout_ms=20_000)


@pytest.fixture
async def hbase(hbase_settings: HBaseSettings) -> AsyncIterator[object]:
    from connectors.hbase import HBaseClient

    async with HBaseClient(hbase_settings) as client:
        yield client
