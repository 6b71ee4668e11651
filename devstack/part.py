"""One interface for the stack's parts.

A part is one module with one class satisfying :class:`Part`. :class:`~.manager.LocalStack` builds the parts
its topology has into one list (``LocalStack._parts``) and handles them through that list only: a new part
touches its own module and that list. Every server of the stack belongs to one part:

- the KDC (:class:`.kdc_part.KdcPart`, ``--kerberos``);
- Kafka (:class:`.kafka_part.KafkaPart`: the broker, its SASL_SSL and SSO listeners);
- HDFS under a cluster (:class:`.hdfs_servers.HdfsServers`: the NameNode and the DataNodes, ``--hdfs``);
- HBase (:class:`.hbase_part.HBasePart`: the standalone JVM, or a cluster's ZooKeeper, master, region servers
  and gateways);
- the Kerberized HBase (:class:`.krb_servers.KerberizedHBase`: ``hbase-krb`` beside the standalone HBase, or a
  Kerberized cluster's gateways, ``--kerberos``);
- the schema registry (:class:`.registry.RegistryPart`, ``--registry``);
- the CDC part (:class:`.cdc.CdcServers`: PostgreSQL and Kafka Connect, ``--cdc``).

The list's order is the order in which parts render, are waited for and have their round trips checked: a part
comes after those whose files it reads (the realm's keytabs) and those it needs to answer (HBase before its
Kerberized gateways, Kafka before the registry and Kafka Connect), and a part HBase keeps its data on (HDFS)
comes before HBase, so that its failure names it rather than a gateway that cannot write. Processes start in
the topology's order (:mod:`.topology`), each through its part.

A part is built by LocalStack from the settings, the layout, the topology's processes of its roles and their
:class:`~.processes.OwnedProcess` handles; building it reads nothing and starts nothing. Then:

- :meth:`Part.provisioned` by ``up`` when every process of the stack runs, before it reuses the stack;
- :meth:`Part.provision` by ``up`` after the jars of Kafka and HBase are cached, before anything renders or
  starts;
- :meth:`Part.render` before any process of the stack starts (``up``, after provisioning), in list order. What
  a part puts into another's configuration goes through a hook of that other part: HBase asks the parts it
  is given for an :class:`~.hbase_part.HBaseConfig` (HDFS: its root and files; the KDC on a Kerberized
  cluster: the security), HDFS asks the KDC for a Kerberized HDFS's security;
- :meth:`Part.start` for each of its processes whose pid is not running, in topology order;
- :meth:`Part.wait_ready` by ``up``, in list order;
- :meth:`Part.ready` once, by ``check_ready`` (``stack status``, and ``up`` before it reuses a stack), in list
  order, through :func:`check`, which words its failures;
- :meth:`Part.stop` by ``down``, after every process has been stopped by its pid file, in reverse list order;
- :meth:`Part.status` by ``stack status`` and ``stack up``, to say where the part answers.

A part whose processes another one's depend on starts and waits for them itself inside :meth:`Part.start`
(ZooKeeper before the HBase servers, PostgreSQL before Kafka Connect, the KDC before any Kerberized server, HDFS
before the HBase master).

Open points:

- whether a later ``up`` without ``--cdc``, ``--registry`` or ``--kerberos`` keeps a part that runs (its pid
  files, the recorded topology) is decided in ``LocalStack.__init__``, before the topology and the parts
  exist; so is PostgreSQL's stop signal (``LocalStack._owned``);
- the commands of the processes of Kafka, HDFS and HBase are the stack's (:func:`~.launch.server_argv`, handed
  to those parts as a callable): they share the JVM options, the realm of a Kerberized cluster and the
  namespaces of ``--netns``;
- ``stack status`` and ``stack up`` print each part's :meth:`Part.status` at a place of their own among the
  stack's lines (``pipeline.cli.stack``); Kafka's SSO listener has lines of its own
  (:meth:`.kafka_part.KafkaPart.sso_status`), printed after the Kerberos parts'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pipeline.errors import StackError

from .processes import OwnedProcess, tail
from .readiness import wait_until
from .topology import ServerProcess

__all__ = ["Part", "check", "wait_for"]


class Part(Protocol):
    """One part of the local stack: its processes, configuration and round trip."""

    #: the topology roles whose processes this part starts (``LocalStack._start`` hands them over)
    roles: frozenset[str]

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
        (:func:`wait_for` words it). A part whose :meth:`start` waited checks once more."""

    def ready(self, timeout_s: float) -> None:
        """One round trip through the part as a client would make it, within ``timeout_s``. Raises
        :class:`~pipeline.errors.StackError` when it words the failure itself, or whatever else failed,
        unwrapped: :func:`check` words it."""

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


def check(part: Part, timeout_s: float) -> None:
    """``part``'s round trip once (:meth:`Part.ready`): a :class:`~pipeline.errors.StackError` it raised passes
    as it is, any other failure as a StackError ``<what> failed its round trip: <exception>``."""
    try:
        part.ready(timeout_s)
    except StackError:
        raise
    except Exception as exc:
        raise StackError(f"{part.what} failed its round trip: {exc!r}") from exc
