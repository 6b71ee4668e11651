"""The CDC part of the local stack (``stack up --cdc``, ``[stack] cdc``): PostgreSQL 15 and a standalone
Kafka Connect worker running Debezium's PostgreSQL connector, beside the usual Kafka and HBase.

- ``postgres``: the distribution's PostgreSQL (:mod:`.pgserver` says how it is set up and run, and
  why as the ``postgres`` user when the stack runs as root), data in ``<state>/postgres``.
- ``connect``: Kafka Connect from the cached jars (``infra/connect``), Debezium in its plugin path,
  offsets in ``<state>/connect`` (:mod:`.connect` has its configuration).

Start: PostgreSQL first; once it answers, the example database is prepared (:meth:`.PostgresServer.
prepare_database`) and the replication slot is kept or remade together with Connect's offsets
(:meth:`.PostgresServer.sync_slot`), then Connect starts. ``up`` returns once a round trip succeeds:
the CDC user logs in over TCP as Debezium does, the connector and its task are RUNNING (Connect's
REST API), and a row written in the probe table comes back as its change event on its Kafka topic.
``down`` stops Connect first (it flushes its offsets), then PostgreSQL (fast shutdown: SIGINT).

:class:`CdcServers` is the part behind the stack's part interface (:mod:`.part`): provisioning checks
PostgreSQL's binaries and caches Connect's and Debezium's jars, and stops a running Connect that must start
afresh (new jars, or a FAILED connector or task).

Failures are one- or two-line :class:`~pipeline.errors.StackError` naming the server and its log file.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable

from pipeline.errors import StackError

from .connect import (
    CONNECTOR_NAME,
    connect_argv,
    connector_problem,
    connector_properties,
    render_properties,
    topic_of,
    worker_properties,
)
from .layout import DEBEZIUM_VERSION, StackLayout
from .pgserver import CDC_USER, DATABASE, POSTGRES_MAJOR, PROBE_TABLE, captured_tables
from .postgres import PostgresServer, first_line
from .processes import OwnedProcess
from .provision import cdc_classpaths_ready, ensure_cdc_classpaths
from .readiness import change_event_round_trip, ensure_topics, wait_until
from .settings import StackSettings
from .topology import CDC_ROLES, ServerProcess

__all__ = ["CdcServers", "probe_matches"]

_WHAT = {"postgres": "PostgreSQL", "connect": "Kafka Connect"}


def probe_matches(value: bytes | None, token: str) -> bool:
    """Whether a record's value is the probe row's change event carrying ``token`` (schemaless JSON)."""
    if value is None:
        return False
    try:
        after = json.loads(value).get("after") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(after, dict) and after.get("token") == token


class CdcServers:
    """PostgreSQL and Kafka Connect of one stack (a :class:`~.part.Part`): ``postgres`` and ``connect`` are
    their owned processes."""

    roles = frozenset(CDC_ROLES)

    def __init__(self, settings: StackSettings, layout: StackLayout, postgres: OwnedProcess,
                 connect: OwnedProcess) -> None:
        self.settings = settings
        self.layout = layout
        self.postgres = postgres
        self.connect = connect
        self.pg = PostgresServer(settings, layout)

    def __repr__(self) -> str:
        return (f"CdcServers(postgres={self.postgres.pid()} on {self.settings.postgres_port}, "
                f"connect={self.connect.pid()} on {self.settings.connect_port})")

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.connect_port}"

    @property
    def what(self) -> str:
        return f"the CDC part (PostgreSQL on 127.0.0.1:{self.settings.postgres_port}, Kafka Connect at {self.rest_url})"

    def topic(self, table: str) -> str:
        """The topic of ``table``'s change events (``<cdc_topic_prefix>.<schema>.<table>``)."""
        return topic_of(self.settings, table)

    def provisioned(self) -> bool:
        """Whether every jar the CDC part runs on is cached (a reused stack checks it: a newer version of
        the project may need jars a running Connect lacks)."""
        return cdc_classpaths_ready(self.layout)

    def provision(self) -> bool:
        """Check PostgreSQL's binaries, cache Connect's and Debezium's jars; True when any were downloaded.
        A running Connect that started before new jars reached its plugin folder is stopped, so that
        ``up`` starts it again on them (Connect reads its plugins once, at start); so is one whose connector
        or task FAILED (:meth:`restart_failed`)."""
        self.pg.check_binaries()
        downloaded = ensure_cdc_classpaths(self.layout)
        if downloaded and self.connect.pid() is not None:
            self.connect.stop()
        self.restart_failed()
        return downloaded

    def render(self) -> None:
        """Nothing ahead of the start: PostgreSQL's files are made by initdb as it first starts, Connect's
        properties as it starts (:meth:`start_connect`)."""

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Start ``postgres`` (:meth:`start_postgres`) or ``connect`` (:meth:`start_connect`)."""
        (self.start_postgres if proc.role == "postgres" else self.start_connect)(deadline)

    def stop(self) -> None:
        """Nothing beyond its processes: the database, the slot and Connect's offsets stay in the state folder."""

    def status(self) -> list[str]:
        """Where PostgreSQL and Kafka Connect listen, who logs in (a password file's path, never its
        contents), and which table goes to which topic."""
        s = self.settings
        return [f"CDC: PostgreSQL {POSTGRES_MAJOR} on 127.0.0.1:{s.postgres_port} (database {DATABASE}, "
                f"user {CDC_USER}, password file {self.pg.password_file}; wal_level=logical)",
                f"  Kafka Connect {self.rest_url}: connector {CONNECTOR_NAME} (Debezium {DEBEZIUM_VERSION}, "
                "pgoutput; JSON without schemas)",
                *(f"  {table} -> topic {self.topic(table)}" for table in captured_tables(s))]

    # -- starting ------------------------------------------------------------------------------------

    def start_postgres(self, deadline: float) -> None:
        """initdb (first time), start the postmaster, wait until it answers on its socket."""
        argv = self.pg.prepare(self.postgres.log_file)
        self.postgres.start(argv, cwd=self.layout.postgres)
        self._wait(self.postgres, self.pg.check_socket, deadline)

    def start_connect(self, deadline: float) -> None:
        """Prepare the database and the slot (Connect is not running: the slot is free), render the
        worker's and the connector's properties, start the worker."""
        self._wait(self.postgres, self.pg.check_socket, deadline)
        try:
            self.pg.prepare_database()
            self.pg.sync_slot()
        except StackError as exc:
            raise StackError(f"preparing PostgreSQL for Debezium failed: {exc}") from exc
        conf = self.layout.conf
        conf.mkdir(parents=True, exist_ok=True)
        worker, connector = conf / "connect-worker.properties", conf / "connect-cdc.properties"
        worker.write_text(render_properties(worker_properties(self.settings, self.layout),
                                            "Kafka Connect worker of the local CDC stack (rendered by `stack up`)"))
        try:
            props = connector_properties(self.settings, self.pg.password_file)
        except ValueError as exc:
            raise StackError(str(exc)) from exc
        connector.write_text(render_properties(props, "Debezium PostgreSQL connector (rendered by `stack up`)"))
        # the captured tables' topics with several partitions (Connect would make them with the broker's
        # default of one): several workers can share them, and a changed primary key may move partitions.
        # Kafka may still be starting (a cold `up` starts every server at once): retried until the deadline
        topics = {self.topic(t): self.settings.cdc_topic_partitions for t in self.settings.cdc_tables}
        try:
            wait_until(lambda: ensure_topics(f"127.0.0.1:{self.settings.kafka_port}", topics, 10.0), deadline)
        except Exception as exc:
            raise StackError(f"creating the CDC topics in Kafka failed: {first_line(str(exc)) or exc!r}") from exc
        self.connect.start(connect_argv(self.settings, self.layout, worker, connector), cwd=self.layout.connect_state)

    def restart_failed(self) -> None:
        """Stop a running Connect whose connector or task FAILED, so that ``up`` starts it afresh (after
        checking the slot again)."""
        if self.connect.pid() is None:
            return
        try:
            problem = connector_problem(self._status(2.0))
        except Exception:
            return  # still starting, or not answering: the wait for readiness decides
        if problem is not None and "FAILED" in problem:
            self.connect.stop()

    # -- readiness -----------------------------------------------------------------------------------

    def ready(self, timeout_s: float = 10.0) -> None:
        """The CDC round trip once (see the module docstring); raises :class:`StackError` saying what failed."""
        self.pg.check_login(timeout_s)
        self._check_connector(timeout_s)
        self._probe(timeout_s)

    def wait_ready(self, deadline: float) -> None:
        """PostgreSQL's login, then Connect's round trip, each retried until ``deadline`` while its process
        runs; a short StackError naming the server and its log if not."""
        self._wait(self.postgres, lambda: self.pg.check_login(10.0), deadline)
        self._wait(self.connect, self._connector_round_trip, deadline)

    def _connector_round_trip(self) -> None:
        self._check_connector(10.0)
        self._probe(10.0)

    def _check_connector(self, timeout_s: float) -> None:
        problem = connector_problem(self._status(timeout_s))
        if problem is not None:
            raise StackError(problem)

    def _status(self, timeout_s: float) -> str:
        url = f"{self.rest_url}/connectors/{CONNECTOR_NAME}/status"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return str(response.read().decode())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise StackError(f"connector {CONNECTOR_NAME} is not registered in Kafka Connect (yet)") from exc
            raise StackError(f"Kafka Connect's REST API answered {exc.code} at {url}") from exc
        except OSError as exc:
            raise StackError(f"Kafka Connect's REST API does not answer at {self.rest_url} ({exc})") from exc

    def _probe(self, timeout_s: float) -> None:
        token = uuid.uuid4().hex
        topic = self.topic(PROBE_TABLE)
        try:
            change_event_round_trip(f"127.0.0.1:{self.settings.kafka_port}", topic,
                                    lambda: self.pg.write_probe(token), lambda v: probe_matches(v, token), timeout_s)
        except TimeoutError as exc:
            raise StackError(f"a row written in {PROBE_TABLE} did not reach topic {topic} within "
                             f"{timeout_s:.0f} s") from exc

    def _wait(self, owned: OwnedProcess, check: Callable[[], None], deadline: float) -> None:
        """Wait until ``check`` passes while ``owned`` runs; a short StackError naming it and its log if not."""
        what = f"{_WHAT.get(owned.name, owned.name)} ({owned.name})"
        while True:
            if owned.pid() is None:
                raise StackError(f"{what} exited during start-up; see its log: {owned.log_file}")
            try:
                check()
            except Exception as exc:
                if time.monotonic() >= deadline:
                    reason = first_line(str(exc)) or type(exc).__name__
                    raise StackError(f"{what} did not become ready within {self.settings.start_timeout_s:.0f} s "
                                     f"({reason});\n  see its log: {owned.log_file}") from exc
                time.sleep(0.5)
            else:
                return
