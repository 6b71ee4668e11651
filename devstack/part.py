"""Design sketch: one interface for the stack's optional parts.

Today :class:`~.manager.LocalStack` threads each add-on (secure, cdc, registry, kerberos, hdfs, the
cluster shape) through ``__init__``, ``_up``, ``check_ready``, ``_render``, ``_start`` and ``down``: a
new part touches every one of them. The aim is that a part is one module with one class satisfying
:class:`Part`, and LocalStack holds a list of the parts its topology has (``LocalStack._parts``) and
calls them in the order of that list, which is the order their processes start in.

A part is built by LocalStack from the settings, the layout, the topology's processes of its roles and
their :class:`~.processes.OwnedProcess` handles; building it reads nothing and starts nothing. Then:

- :meth:`Part.render` before any process of the stack starts (``up``, after provisioning);
- :meth:`Part.start` for each of its processes whose pid is not running, in topology order;
- :meth:`Part.ready` in a loop until the start deadline (``up``), once (``check_ready``, ``status``);
- :meth:`Part.stop` by ``down``, after every process has been stopped by its pid file;
- :meth:`Part.status` by ``stack status`` and ``stack up``, to say where the part answers.

Only the schema registry (:class:`.registry.RegistryPart`) follows it so far. Open points for the
others:

- provisioning (downloads into the cache) stays in ``LocalStack._up``; it could be a sixth method, or
  ``render``'s first step;
- a part that another part's process depends on (the KDC before a Kerberized Kafka, PostgreSQL before
  Kafka Connect) starts them itself inside :meth:`Part.start`, as today; the list order handles the rest;
- parts that change the core processes' configuration (secure and SSO listeners, a Kerberized cluster,
  HDFS under HBase) render into the core's templates; they need a hook into the core's render values,
  not only files of their own.
"""

from __future__ import annotations

from typing import Protocol

from .topology import ServerProcess

__all__ = ["Part"]


class Part(Protocol):
    """One optional part of the local stack: its processes, configuration and round trip."""

    #: the topology roles whose processes this part starts (``LocalStack._start`` hands them over)
    roles: frozenset[str]

    @property
    def what(self) -> str:
        """How messages name the part, e.g. ``the schema registry at <url>``."""
        ...

    def render(self) -> None:
        """Write what the part's processes read (configuration files, folders) before any of them starts.
        Idempotent; starts nothing. A part configured on its command line alone does nothing."""

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Start ``proc`` (one of :attr:`roles`), not running. Returns once it is launched: being ready
        is :meth:`ready`'s. ``deadline`` (monotonic) bounds any wait for a process it depends on.
        Raises :class:`~pipeline.errors.StackError` when it cannot be started."""

    def ready(self, timeout_s: float) -> None:
        """One round trip through the part as a client would make it, within ``timeout_s``. Raises
        whatever failed, unwrapped: the caller retries it until its deadline or words the failure."""

    def stop(self) -> None:
        """What ``down`` must do beyond stopping the part's processes (LocalStack stops every process by
        its pid file, in reverse topology order, before calling this). Most parts have nothing to do."""

    def status(self) -> list[str]:
        """Lines for ``stack status`` and ``stack up``: where the part answers and what it keeps where
        (paths, never secrets). Plain text."""
        ...
