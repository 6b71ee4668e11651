from collections.abc import Iterator

import pytest

from connectors.stack import LocalStack
from tests.integration.reader_support import design_tables


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def reader_tables(stack: LocalStack) -> Iterator[dict[str, str]]:
    """One table per reader-test design (tests.integration.reader_support.DESIGNS) for a module."""
    yield from design_tables(stack)
