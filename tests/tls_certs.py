"""Certificates for TLS tests, made with openssl: a CA, a server certificate for ``localhost`` signed by
it, and a second, unrelated CA (for the wrong-CA tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["make_certs"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path) -> Path:
    """Into ``d``: ``ca.pem`` (+ ``ca.key``), ``other.pem``, ``server.pem`` and ``server.key`` (for
    ``localhost``, signed by ``ca``) and ``server-bundle.pem`` (certificate then key). Returns ``d``."""
    for ca in ("ca", "other"):  # with the extensions Python 3.13's strict verification asks of a CA
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                 "-days", "2", "-subj", f"/CN={ca}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n"
                               "authorityKeyIdentifier=keyid,issuer\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    (d / "server-bundle.pem").write_text((d / "server.pem").read_text() + (d / "server.key").read_text())
    return d
