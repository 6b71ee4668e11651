"""Which Thrift gateway takes the next call: health states and the choice among them (pure: no I/O,
no clock of its own; thread-safe, since the probe thread marks gateways up).

Health state machine, per gateway::

    up --(a call failed with a connection-level error: mark_down)--> down
    down --(the periodic probe answered: mark_up)--> up

Only connection-level failures (the gateway refused, reset or closed the connection, or a round
trip timed out) take a gateway down; an error HBase itself returned through the gateway (a busy or
moved region, a bad request) says the gateway works.

Choice (:meth:`GatewayBoard.choose`), among the gateways that are up and not excluded:

1. locality: when the caller names the region server (``host:port``) its rows live on, a gateway
   declared to sit with that server (``server``), the least busy of them if several;
2. else the least busy (fewest calls in flight); ties go round-robin, so an idle client still
   spreads its calls over every gateway.

None when no gateway qualifies (every one down or excluded): the caller raises
:class:`~pipeline.errors.HBaseUnavailable`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GatewayBoard", "GatewayHealth"]


@dataclass
class GatewayHealth:
    """One gateway's state and counters. ``calls`` counts every call started on it, ``errors`` every
    one that failed (whatever the cause), ``failovers`` the calls retried on another gateway after
    failing here, ``downs`` the times it was taken out."""

    name: str
    server: str | None = None
    up: bool = True
    in_flight: int = 0
    calls: int = 0
    errors: int = 0
    failovers: int = 0
    downs: int = 0
    last_error: str | None = None
    changed_at: float | None = None  # when the state last changed (the caller's clock)

    def snapshot(self) -> dict[str, Any]:
        return {"state": "up" if self.up else "down", "server": self.server, "in_flight": self.in_flight,
                "calls": self.calls, "errors": self.errors, "failovers": self.failovers, "downs": self.downs,
                "last_error": self.last_error, "changed_at": self.changed_at}


class GatewayBoard:
    """The health of gateways ``0 .. n-1`` (named and optionally placed by ``gateways``: pairs of
    ``(name, server)``) and the choice of the next one (module docstring)."""

    def __init__(self, gateways: Sequence[tuple[str, str | None]]) -> None:
        if not gateways:
            raise ValueError("at least one gateway is needed")
        self._gw = [GatewayHealth(name, server) for name, server in gateways]
        self._lock = threading.Lock()
        self._next = 0  # round-robin cursor for ties

    def __len__(self) -> int:
        return len(self._gw)

    def __repr__(self) -> str:
        states = ", ".join(f"{g.name} {'up' if g.up else 'down'}" for g in self._gw)
        return f"GatewayBoard({states})"

    def name(self, i: int) -> str:
        return self._gw[i].name

    def choose(self, server: str | None = None, exclude: Collection[int] = ()) -> int | None:
        """The gateway for the next call (module docstring), or None when none is up and not excluded."""
        with self._lock:
            up = [i for i, g in enumerate(self._gw) if g.up and i not in exclude]
            if not up:
                return None
            if server is not None:
                local = [i for i in up if self._gw[i].server == server]
                if local:
                    up = local
            least = min(self._gw[i].in_flight for i in up)
            tied = [i for i in up if self._gw[i].in_flight == least]
            n = len(self._gw)
            pick = min(tied, key=lambda i: (i - self._next) % n)
            self._next = (pick + 1) % n
            return pick

    def any_up(self, exclude: Collection[int] = ()) -> bool:
        with self._lock:
            return any(g.up for i, g in enumerate(self._gw) if i not in exclude)

    def started(self, i: int) -> None:
        with self._lock:
            g = self._gw[i]
            g.calls += 1
            g.in_flight += 1

    def finished(self, i: int, error: str | None = None) -> None:
        """The call started on ``i`` ended: successfully (``error`` None) or with ``error``."""
        with self._lock:
            g = self._gw[i]
            g.in_flight -= 1
            if error is not None:
                g.errors += 1
                g.last_error = error

    def failed_over(self, i: int) -> None:
        with self._lock:
            self._gw[i].failovers += 1

    def mark_down(self, i: int, error: str, now: float) -> bool:
        """Take ``i`` out; True when it was up (the caller logs the change once)."""
        with self._lock:
            g = self._gw[i]
            g.last_error = error
            if not g.up:
                return False
            g.up = False
            g.downs += 1
            g.changed_at = now
            return True

    def mark_up(self, i: int, now: float) -> bool:
        """Take ``i`` back in; True when it was down."""
        with self._lock:
            g = self._gw[i]
            if g.up:
                return False
            g.up = True
            g.changed_at = now
            return True

    def is_up(self, i: int) -> bool:
        with self._lock:
            return self._gw[i].up

    def down(self) -> list[int]:
        with self._lock:
            return [i for i, g in enumerate(self._gw) if not g.up]

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per gateway name: state (``up``/``down``), calls, errors, failovers, last error, ..."""
        with self._lock:
            return {g.name: g.snapshot() for g in self._gw}
