"""Fixtures shared by the unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tls_certs import make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost signed by it, and a second (unrelated) CA
    (:func:`tests.tls_certs.make_certs`)."""
    return make_certs(tmp_path_factory.mktemp("tls"))
