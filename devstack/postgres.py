"""The CDC stack's PostgreSQL server: its folders, ``initdb``, SQL through ``psql``, the replication
slot kept together with Kafka Connect's offsets. What it runs and why: :mod:`.pgserver`.

Every failure is a :class:`~pipeline.errors.StackError` of one or two lines naming what failed and
the log or file to read; psql's own first error line is quoted when it says why, never log lines.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from pipeline.errors import StackError

from .layout import StackLayout
from .pgserver import (
    CDC_USER,
    DATABASE,
    POSTGRES_MAJOR,
    PROBE_TABLE,
    SLOT,
    RunAs,
    SlotRecord,
    SlotState,
    bin_dir,
    captured_tables,
    initdb_argv,
    postgres_argv,
    psql_argv,
    publication_sql,
    searchable_by,
    setup_sql,
    slot_action,
    tables_sql,
)
from .settings import StackSettings

__all__ = ["PostgresServer", "first_line"]

_SYSTEM_USER = "postgres"
_SOCKET_PATH_MAX = 107  # sun_path of a Unix socket, less its NUL


def first_line(text: str, limit: int = 200) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` characters ('' when there is none)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


class PostgresServer:
    """PostgreSQL's folders, commands and SQL for one stack (the process itself is an
    :class:`~.processes.OwnedProcess` named ``postgres``)."""

    def __init__(self, settings: StackSettings, layout: StackLayout) -> None:
        self.settings = settings
        self.layout = layout
        self.data = layout.postgres / "data"
        self.run_dir = layout.postgres / "run"
        #: the CDC user's password, as Kafka Connect's FileConfigProvider reads it (``password=...``)
        self.password_file = layout.connect_state / "cdc-password.properties"
        self.offsets_file = layout.connect_state / "offsets.dat"
        self.slot_record_file = layout.connect_state / "slot.json"

    def __repr__(self) -> str:
        return f"PostgresServer(127.0.0.1:{self.settings.postgres_port}, data={self.data})"

    # -- preparing and starting ---------------------------------------------------------------------

    def check_binaries(self) -> None:
        """Raise :class:`StackError` with an install hint when initdb, postgres or psql is missing."""
        folder = bin_dir(self.settings)
        missing = [n for n in ("initdb", "postgres", "psql") if not (folder / n).is_file()]
        if missing:
            raise StackError(
                f"PostgreSQL {POSTGRES_MAJOR} was not found ({', '.join(missing)} missing in {folder}): install "
                f"it (e.g. `apt-get install postgresql-{POSTGRES_MAJOR}`) or set [stack] postgres_bin_dir")
        if os.geteuid() == 0 and shutil.which("setpriv") is None:
            raise StackError("PostgreSQL refuses to run as root and `setpriv` (util-linux), which runs it as the "
                             "`postgres` user, was not found on PATH")

    def run_as(self) -> RunAs:
        """The current user, or as root the ``postgres`` system user (see :mod:`.pgserver`)."""
        if os.geteuid() != 0:
            return RunAs()
        try:
            entry = pwd.getpwnam(_SYSTEM_USER)
        except KeyError:
            raise StackError("PostgreSQL refuses to run as root and there is no `postgres` system user: install "
                             f"the postgresql-{POSTGRES_MAJOR} package, or run `stack up --cdc` as another user"
                             ) from None
        gids = os.getgrouplist(entry.pw_name, entry.pw_gid)
        reachable = searchable_by(self.layout.postgres, entry.pw_uid, gids)
        return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, traverse=not reachable)

    def prepare(self, log: Path) -> list[str]:
        """Make the folders (owned by the server's user, mode 0700) and the password file (once), run
        ``initdb`` when the data directory is not initialised yet (its output appended to ``log``).
        Returns the postmaster's command line."""
        socket = self.run_dir / f".s.PGSQL.{self.settings.postgres_port}"
        if len(str(socket)) > _SOCKET_PATH_MAX:
            raise StackError(f"PostgreSQL's socket path {socket} is longer than {_SOCKET_PATH_MAX} characters, "
                             "the limit of a Unix socket: use a shorter state folder (HBASE_INGEST_STATE)")
        self.layout.postgres.mkdir(parents=True, exist_ok=True)
        who = self.run_as()
        for folder in (self.data, self.run_dir):
            folder.mkdir(exist_ok=True)
            folder.chmod(0o700)
            if who.user is not None:
                os.chown(folder, who.uid, who.gid)
        self._ensure_password()
        if not (self.data / "PG_VERSION").is_file():
            self._initdb(who, log)
        return who.wrap(postgres_argv(self.settings, self.data, self.run_dir))

    def _initdb(self, who: RunAs, log: Path) -> None:
        for leftover in self.data.iterdir():  # an initdb that was interrupted: it refuses a non-empty folder
            shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(b"==== hbase-ingest stack: initdb ====\n")
            out.flush()
            done = subprocess.run(who.wrap(initdb_argv(self.settings, self.data)), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False, timeout=300)
        if done.returncode != 0:
            raise StackError(f"PostgreSQL's initdb failed (exit {done.returncode}); see its log: {log}")

    def _ensure_password(self) -> None:
        self.layout.connect_state.mkdir(parents=True, exist_ok=True)
        self.layout.connect_state.chmod(0o700)
        if self.password_file.exists():
            return
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"password={secrets.token_urlsafe(24)}\n")

    def password(self) -> str:
        for line in self.password_file.read_text().splitlines():
            if line.startswith("password="):
                return line.removeprefix("password=").strip()
        raise StackError(f"{self.password_file} holds no password= line: delete it and run `stack up --cdc` again")

    # -- SQL -----------------------------------------------------------------------------------------

    def sql(self, statements: str, database: str = DATABASE, timeout_s: float = 30.0) -> list[list[str]]:
        """Run ``statements`` as the superuser over the Unix socket; the rows they return, each a list
        of column texts. Raises :class:`StackError` with psql's first error line."""
        try:
            done = subprocess.run(psql_argv(self.settings, self.run_dir, database), input=statements,
                                  capture_output=True, text=True, check=False, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"PostgreSQL did not answer within {timeout_s:.0f} s (psql in {database})") from exc
        if done.returncode != 0:
            raise StackError(f"PostgreSQL refused SQL in database {database}: {first_line(done.stderr)}")
        return [line.split("|") for line in done.stdout.splitlines() if line]

    def check_login(self, timeout_s: float = 10.0) -> None:
        """Log in over TCP as the CDC user with its password, as Debezium does, and check that
        ``wal_level`` is ``logical``. Raises :class:`StackError` saying what failed."""
        argv = [str(bin_dir(self.settings) / "psql"), "-X", "-A", "-t", "-h", "127.0.0.1", "-p",
                str(self.settings.postgres_port), "-U", CDC_USER, "-d", DATABASE, "-c", "SHOW wal_level"]
        env = {**os.environ, "PGPASSWORD": self.password(), "PGCONNECT_TIMEOUT": str(max(1, int(timeout_s)))}
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=timeout_s + 5)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"no answer from PostgreSQL on 127.0.0.1:{self.settings.postgres_port}") from exc
        if done.returncode != 0:
            raise StackError(f"login as {CDC_USER} failed: {first_line(done.stderr)}")
        if done.stdout.strip() != "logical":
            raise StackError(f"PostgreSQL runs with wal_level={done.stdout.strip()}, not logical")

    def check_socket(self) -> None:
        """One query over the Unix socket (the server accepts connections); raises :class:`StackError`."""
        self.sql("SELECT 1", database="postgres", timeout_s=10.0)

    def prepare_database(self) -> None:
        """The CDC role, the example database and tables, and the publication (idempotent). Raises
        :class:`StackError` naming a captured table that does not exist."""
        self.sql(setup_sql(self.password()), database="postgres")
        self.sql(tables_sql())
        tables = captured_tables(self.settings)
        found = {row[0] for row in self.sql(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p')")}
        missing = [t for t in tables if t not in found]
        if missing:
            raise StackError(f"[stack] cdc_tables names {', '.join(missing)}, which database {DATABASE} does not "
                             f"have: create it there (as user {CDC_USER}), or change cdc_tables")
        self.sql(publication_sql(tables))

    # -- the replication slot and Connect's offsets ---------------------------------------------------

    def slot_state(self) -> SlotState:
        rows = self.sql(f"SELECT database, plugin, coalesce(wal_status, '') FROM pg_replication_slots "
                        f"WHERE slot_name = '{SLOT}'")
        if not rows:
            return "missing"
        database, plugin, wal_status = rows[0]
        return "ok" if (database, plugin) == (DATABASE, "pgoutput") and wal_status != "lost" else "lost"

    def recorded_slot(self) -> SlotRecord | None:
        try:
            data = json.loads(self.slot_record_file.read_text())
            return SlotRecord(str(data["slot"]), str(data["database"]), tuple(data["tables"]),
                              str(data["topic_prefix"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def sync_slot(self) -> bool:
        """Keep, or remake together, the replication slot and Connect's offsets (:func:`.pgserver.slot_action`).
        Kafka Connect must not be running. Returns True when they were remade (Debezium then snapshots)."""
        wanted = SlotRecord.wanted(self.settings)
        if slot_action(self.slot_state(), self.recorded_slot(), wanted) == "keep":
            return False
        self.slot_record_file.unlink(missing_ok=True)
        self.sql(f"SELECT pg_drop_replication_slot('{SLOT}') FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
        self.offsets_file.unlink(missing_ok=True)
        self.sql(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
        self.slot_record_file.write_text(json.dumps(wanted.to_dict(), indent=2) + "\n")
        return True

    def write_probe(self, token: str) -> None:
        """Upsert the probe's one row with ``token`` (a change event on the probe's topic follows)."""
        if not token.isalnum():
            raise ValueError("the probe token must be alphanumeric")
        self.sql(f"INSERT INTO {PROBE_TABLE} (id, token) VALUES (1, '{token}') "
                 "ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token, at = now()")
