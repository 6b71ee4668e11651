"""PostgreSQL of the CDC stack: the commands that make and run its server and the SQL that prepares
the example database (pure: settings and paths in, argv and SQL out; :mod:`.postgres` runs them).

- **Binaries**: PostgreSQL 15's ``initdb``, ``postgres`` and ``psql`` from ``[stack] postgres_bin_dir``,
  by default Debian's :data:`DEBIAN_BIN_DIR` (package ``postgresql-15``).
- **Server**: data directory ``<state>/postgres/data`` (``initdb --encoding=UTF8 --locale=C``); every
  other setting is on the command line (:func:`postgres_argv`), so a changed port takes effect at the
  next start: ``listen_addresses=127.0.0.1``, ``port=postgres_port``, the Unix socket in
  ``<state>/postgres/run``, ``wal_level=logical`` (what logical decoding needs), room for a few WAL
  senders and slots, 64 MB of shared buffers and 40 connections (a small test database; the defaults
  are 128 MB and 100), and ``max_slot_wal_keep_size`` so that a slot nobody reads (Connect stopped for
  days) cannot fill the disk: past it PostgreSQL invalidates the slot, and the next ``up`` remakes it.
- **Authentication** (initdb's pg_hba.conf): *trust* on the Unix socket, whose folder is mode 0700 and
  owned by the server's OS user, so only that user and root reach it (the stack and the tests use it,
  as the superuser ``postgres``); *scram-sha-256* over TCP on 127.0.0.1, for normal and replication
  connections. :data:`CDC_USER` (LOGIN REPLICATION, owner of :data:`DATABASE` and of the example
  tables) logs in with a generated password kept in a 0600 file; the superuser has no password, so it
  cannot log in over TCP. This is a local test setup, not a hardened server.
- **Who runs it**: PostgreSQL refuses to run as root. As root, ``initdb`` and ``postgres`` run as the
  ``postgres`` system user through ``setpriv``, which execs (the pid the stack records is the
  postmaster's), and their folders are owned by that user. When that user cannot search a parent of
  the state folder (root's home is mode 0700 on Debian), the server also gets ``CAP_DAC_READ_SEARCH``
  as an ambient capability (it then may traverse and read folders it does not own): :class:`RunAs`.
  Not root: the current user runs it.
- **Database** (:func:`setup_sql`, :func:`tables_sql`, :func:`publication_sql`, idempotent): role
  :data:`CDC_USER`, database :data:`DATABASE`, the example table :data:`ORDERS_DDL` and the readiness probe's table
  :data:`PROBE_TABLE`, both with ``REPLICA IDENTITY FULL`` (a change event's ``before`` holds the
  whole old row on updates and deletes), and the publication :data:`PUBLICATION` over the captured
  tables. The replication slot :data:`SLOT` is made by :mod:`.postgres` together with Connect's
  offsets (:func:`slot_action`).
"""

from __future__ import annotations

import re
import signal
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .settings import StackSettings

__all__ = [
    "CDC_USER",
    "DATABASE",
    "DEBIAN_BIN_DIR",
    "ORDERS_DDL",
    "POSTGRES_MAJOR",
    "PROBE_TABLE",
    "PUBLICATION",
    "SLOT",
    "STOP_SIGNAL",
    "SUPERUSER",
    "RunAs",
    "SlotRecord",
    "SlotState",
    "bin_dir",
    "captured_tables",
    "initdb_argv",
    "postgres_argv",
    "psql_argv",
    "publication_sql",
    "searchable_by",
    "setup_sql",
    "slot_action",
    "tables_sql",
]

POSTGRES_MAJOR = 15
DEBIAN_BIN_DIR = Path(f"/usr/lib/postgresql/{POSTGRES_MAJOR}/bin")
DATABASE = "shop"
CDC_USER = "cdc"
SUPERUSER = "postgres"
PUBLICATION = "hbase_ingest_cdc"
SLOT = "hbase_ingest_cdc"
#: captured with the configured tables: the readiness round trip writes one row of it
PROBE_TABLE = "public.hbase_ingest_probe"
#: PostgreSQL's fast shutdown: ends the sessions, writes a shutdown checkpoint, exits cleanly
#: (SIGTERM, the smart shutdown, would wait for every client to leave)
STOP_SIGNAL = signal.SIGINT
ORDERS_DDL = ("CREATE TABLE IF NOT EXISTS public.orders (order_id bigint PRIMARY KEY, seller_id text, "
              "buyer_id text, amount_cents bigint, status text, updated_at timestamptz)")
_PROBE_DDL = (f"CREATE TABLE IF NOT EXISTS {PROBE_TABLE} (id int PRIMARY KEY, token text NOT NULL, "
              "at timestamptz NOT NULL DEFAULT now())")
_PASSWORD = re.compile(r"^[A-Za-z0-9_-]{16,}$")


def bin_dir(s: StackSettings) -> Path:
    return s.postgres_bin_dir or DEBIAN_BIN_DIR


def captured_tables(s: StackSettings) -> list[str]:
    """The tables Debezium captures: ``[stack] cdc_tables`` and the probe's table, each once, in that order."""
    return list(dict.fromkeys([*s.cdc_tables, PROBE_TABLE]))


@dataclass(frozen=True)
class RunAs:
    """Who runs ``initdb`` and ``postgres``: ``user`` None is the current user; else a system user
    (its uid and gid), with ``traverse`` the ambient ``CAP_DAC_READ_SEARCH`` it needs to reach a data
    directory below a folder it cannot search."""

    user: str | None = None
    uid: int = -1
    gid: int = -1
    traverse: bool = False

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run as this user (``setpriv`` execs it: the pid stays the command's)."""
        if self.user is None:
            return list(argv)
        caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] if self.traverse else []
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", *caps, "--", *argv]


def searchable_by(path: Path, uid: int, gids: Sequence[int],
                  stat_of: Callable[[Path], tuple[int, int, int]] | None = None) -> bool:
    """Whether ``uid`` (with groups ``gids``) may search every folder from ``/`` down to ``path``, by
    the mode bits (ACLs are not read). ``stat_of``: path -> (mode, owner uid, owner gid)."""
    def default_stat(p: Path) -> tuple[int, int, int]:
        st = p.stat()
        return st.st_mode, st.st_uid, st.st_gid

    look = stat_of or default_stat
    for folder in [path, *path.parents]:
        mode, owner, group = look(folder)
        bit = stat.S_IXUSR if owner == uid else stat.S_IXGRP if group in gids else stat.S_IXOTH
        if not mode & bit:
            return False
    return True


def initdb_argv(s: StackSettings, data: Path) -> list[str]:
    return [str(bin_dir(s) / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth-local=trust",
            "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions"]


def postgres_argv(s: StackSettings, data: Path, run_dir: Path) -> list[str]:
    """The postmaster's command line (the server's settings, see the module docstring)."""
    settings = {
        "listen_addresses": "127.0.0.1", "port": str(s.postgres_port), "unix_socket_directories": str(run_dir),
        "wal_level": "logical", "max_wal_senders": "4", "max_replication_slots": "4",
        "max_slot_wal_keep_size": "1GB", "max_connections": "40", "shared_buffers": "64MB"}
    return [str(bin_dir(s) / "postgres"), "-D", str(data), *[f"-c{k}={v}" for k, v in settings.items()]]


def psql_argv(s: StackSettings, run_dir: Path, database: str) -> list[str]:
    """psql as the superuser over the Unix socket, stopping at the first error, SQL read from stdin,
    rows printed unaligned (``a|b``), one per line."""
    return [str(bin_dir(s) / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(run_dir),
            "-p", str(s.postgres_port), "-U", SUPERUSER, "-d", database, "-f", "-"]


def setup_sql(password: str) -> str:
    """Run in database ``postgres``: the CDC role (its password set again) and the example database."""
    if not _PASSWORD.match(password):  # it is spliced into SQL: only the generated alphabet is accepted
        raise ValueError("the CDC user's password must be 16+ characters of [A-Za-z0-9_-]")
    return (
        f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{CDC_USER}') THEN "
        f"CREATE ROLE {CDC_USER}; END IF; END$$;\n"
        f"ALTER ROLE {CDC_USER} WITH LOGIN REPLICATION PASSWORD '{password}';\n"
        f"SELECT 'CREATE DATABASE {DATABASE} OWNER {CDC_USER}' "
        f"WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{DATABASE}')\\gexec\n")


def tables_sql() -> str:
    """Run in :data:`DATABASE`: the example and probe tables, REPLICA IDENTITY FULL, owned by the CDC user."""
    lines = [ORDERS_DDL, _PROBE_DDL]
    for table in ("public.orders", PROBE_TABLE):
        lines += [f"ALTER TABLE {table} REPLICA IDENTITY FULL", f"ALTER TABLE {table} OWNER TO {CDC_USER}"]
    return ";\n".join(lines) + ";\n"


def publication_sql(tables: Sequence[str]) -> str:
    """Run in :data:`DATABASE`: SELECT on every captured table for the CDC user (Debezium's snapshot
    reads them), and the publication over exactly ``tables`` (made, or set to them). ``tables`` must
    exist."""
    listed = ", ".join(tables)
    lines = [f"GRANT SELECT ON {table} TO {CDC_USER}" for table in tables]
    lines.append(f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = '{PUBLICATION}') THEN "
                 f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {listed}; "
                 f"ELSE ALTER PUBLICATION {PUBLICATION} SET TABLE {listed}; END IF; END$$")
    return ";\n".join(lines) + ";\n"


@dataclass(frozen=True)
class SlotRecord:
    """What the replication slot and Connect's offsets were made for (``slot.json`` beside the offsets):
    when any of it changes, the slot and the offsets are remade together."""

    slot: str
    database: str
    tables: tuple[str, ...]
    topic_prefix: str

    def to_dict(self) -> dict[str, object]:
        return {"slot": self.slot, "database": self.database, "tables": list(self.tables),
                "topic_prefix": self.topic_prefix}

    @classmethod
    def wanted(cls, s: StackSettings) -> SlotRecord:
        return cls(SLOT, DATABASE, tuple(captured_tables(s)), s.cdc_topic_prefix)


SlotState = Literal["missing", "ok", "lost"]


def slot_action(slot: SlotState, recorded: SlotRecord | None, wanted: SlotRecord) -> Literal["keep", "reset"]:
    """Keep the slot and Connect's offsets only when the slot is there and usable and the record says
    both were made for what is wanted now. Otherwise reset: drop the slot (if any), delete the offsets,
    make the slot. Never keep offsets without the slot they were read from: Debezium would find offsets
    saying its snapshot is done and stream from the new slot's start, silently skipping the snapshot
    (rows written before the new slot would never reach Kafka)."""
    return "keep" if slot == "ok" and recorded == wanted else "reset"
