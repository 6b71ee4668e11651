"""One interface for the stack's parts.

A part is one module with one class satisfying :class:`Part`. :class:`~.manager.LocalStack` builds the parts
its topology has into one list (``LocalStack._parts``), in the order their processes start in, and handles
them through that list only: a new part touches its own module and that list. Five parts follow it:

- Kafka (:class:`.kafka_part.KafkaPart`: the broker, its SASL_SSL and SSO listeners), the one part of the
  core (:attr:`Part.core`) so far;
- the Kerberos part (:class:`.krb_servers.KerberosServers`: the KDC, and on the standalone shape the
  Kerberized HBase beside the plain one);
- HDFS under a cluster (:class:`.hdfs_servers.HdfsServers`: the NameNode and the DataNodes);
- the schema registry (:class:`.registry.RegistryPart`);
- the CDC part (:class:`.cdc.CdcServers`: PostgreSQL and Kafka Connect).

A part is built by LocalStack from the settings, the layout, the topology's processes of its roles and
their :class:`~.processes.OwnedProcess` handles; building it reads nothing and starts nothing. Then:

- :meth:`Part.provisioned` by ``up`` when every process of the stack runs, before it reuses the stack;
- :meth:`Part.provision` by ``up`` after the core's jars are cached, before anything renders or starts;
- :meth:`Part.render` before any process of the stack starts (``up``, after provisioning): the parts not of
  the core first, then HBase's configuration (which reads values they contribute, see below), then the
  core parts';
- :meth:`Part.start` for each of its processes whose pid is not running, in topology order;
- :meth:`Part.wait_ready` by ``up``: the core parts' first, then (once HBase is ready) the others', in list
  order;
- :meth:`Part.ready` once, by ``check_ready`` (``stack status``, and ``up`` before it reuses a stack): the
  core parts', HBase's, then the others';
- :meth:`Part.stop` by ``down``, after every process has been stopped by its pid file;
- :meth:`Part.status` by ``stack status`` and ``stack up``, to say where the part answers.

A part whose processes another one depends on starts and waits for them itself inside :meth:`Part.start`
(PostgreSQL before Kafka Connect, the KDC before a Kerberized HBase, HDFS before the HBase master); the list
order handles the rest. A part HBase keeps its data on (:attr:`Part.beneath_hbase`: HDFS) has its round trip
checked first in HBase's own, so that a failure names it rather than a gateway that cannot write.

Open points (what still goes through the core by hand):

- HBase (the standalone JVM, or the cluster's ZooKeeper, master, region servers and gateways) is not a part
  yet: ``LocalStack`` renders its configuration, starts its processes (waiting for ZooKeeper's port),
  waits for it and checks it (the region servers' registration, every gateway's round trip) itself;
- parts that change HBase's configuration render into its templates, in ``LocalStack._render``:
  HDFS's ``core-site.xml`` / ``hdfs-site.xml`` and HBase's root directory on it (:mod:`.hdfs`), and a
  Kerberized cluster's security in ``hbase-site.xml``, ``core-site.xml`` and HDFS's files
  (:mod:`.krb_cluster`). Moving them needs a hook into HBase's render values, not only files of their own;
  likewise the command lines of HDFS's processes, which are the core's (:func:`~.launch.server_argv`, handed
  to :class:`.hdfs_servers.HdfsServers` as a callable);
- whether a later ``up`` without ``--cdc``, ``--registry`` or ``--kerberos`` keeps a part that runs (its pid
  files, the recorded topology) is decided in ``LocalStack.__init__``, before the topology and the parts
  exist; so is PostgreSQL's stop signal (``LocalStack._owned``);
- ``stack status`` and ``stack up`` print each part's :meth:`Part.status` at a place of their own among the
  core's lines (``pipeline.cli.stack``); Kafka's SSO listener has lines of its own
  (:meth:`.kafka_part.KafkaPart.sso_status`), printed after the Kerberos part's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pipeline.errors import StackError

from .processes import OwnedProcess, tail
from .readiness import wait_until
from .topology import ServerProcess

__all__ = ["Part", "wait_for"]


class Part(Protocol):
    """One part of the local stack: its processes, configuration and round trip."""

    #: the topology roles whose processes this part starts (``LocalStack._start`` hands them over)
    roles: frozenset[str]
    #: whether HBase keeps its data on this part (HDFS): its :meth:`ready` then runs first in HBase's round
    #: trip (``check_ready`` and the wait for HBase in ``up``), and not again after it
    beneath_hbase: bool
    #: whether the part is of the core (Kafka): its :meth:`render` runs after the other parts' and HBase's,
    #: its :meth:`ready` and :meth:`wait_ready` before HBase's, and its :meth:`ready` failures pass unwrapped
    core: bool

    @property
    def what(self) -> str:
        """How messages name the part, e.g. ``the schema registry at <url>``."""
        ...

    def provisioned(self) -> bool:
        """Whether the running part has everything it runs on: cheap (files in the cache, no download, no
        tool run, no process started or stopped). False sends a ``up`` that would reuse a running stack
        through :meth:`provision` and the full start instead. A part whose running processes cannot lack
        anything (what they run on is cached before they first start) returns True."""
        ...

    def provision(self) -> bool:
        """Download what the part runs on into the cache (each time: a no-op when it is there) and check the
        tools it needs; True when something was downloaded. May stop a running process of its own that must
        start afresh (one that started before a download it needs, one whose work failed): ``up`` then starts
        it like any process not running. Raises :class:`~pipeline.errors.StackError` naming what is missing
        (with an install hint) or what failed to download."""
        ...

    def render(self) -> None:
        """Write what the part's processes read (configuration files, folders, a realm) before any of them
        starts. Idempotent; starts nothing. A part configured on its command line alone does nothing. Raises
        :class:`~pipeline.errors.StackError` when a file cannot be made."""

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Start ``proc`` (one of :attr:`roles`), not running. Returns once it is launched, or once it answers
        when a process started after it depends on it (see the module docstring); being ready is
        :meth:`wait_ready`'s. ``deadline`` (monotonic) bounds any wait. Raises
        :class:`~pipeline.errors.StackError` when it cannot be started or a wait fails."""

    def wait_ready(self, deadline: float) -> None:
        """Return once the part is ready (its round trips as :meth:`ready`, retried while its processes run,
        until ``deadline``, monotonic), then make what is made once it is (grants). Raises
        :class:`~pipeline.errors.StackError` naming the process that did not become ready and its log
        (:func:`wait_for` words it as the core does). A part that waited in :meth:`start` does nothing."""

    def ready(self, timeout_s: float) -> None:
        """One round trip through the part as a client would make it, within ``timeout_s``. Raises
        :class:`~pipeline.errors.StackError` when it words the failure itself (the caller passes it on as
        it is), or whatever else failed, unwrapped: the caller words it ``<what> failed its round trip:
        <exception>``, or retries it until its deadline."""

    def stop(self) -> None:
        """What ``down`` must do beyond stopping the part's processes (LocalStack stops every process by
        its pid file, in reverse topology order, before calling this). Most parts have nothing to do."""

    def status(self) -> list[str]:
        """Lines for ``stack status`` and ``stack up``: where the part answers and what it keeps where
        (paths, never secrets). Plain text."""
        ...


def wait_for(owned: OwnedProcess, check: Callable[[], object], deadline: float, start_timeout_s: float) -> None:
    """Call ``check`` until it passes (at most every 0.5 s) while ``owned`` runs, until ``deadline``
    (monotonic). A :class:`~pipeline.errors.StackError` (``owned`` died, or ``check`` worded its failure) is
    raised as it is; any other last error as a StackError naming ``owned``, ``start_timeout_s`` (the
    deadline's span, for the message), the error, the log file and its last lines."""
    def probe() -> None:
        owned.check_alive()
        check()

    try:
        wait_until(probe, deadline, pause_s=0.5)
    except StackError:
        raise
    except Exception as exc:
        raise StackError(
            f"{owned.name} did not become ready within {start_timeout_s:.0f} s "
            f"(last error: {exc!r}); see {owned.log_file}; last lines:\n{tail(owned.log_file)}") from exc
