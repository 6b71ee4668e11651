"""How the long-running commands (``run``, ``backfill``) stop on SIGINT/SIGTERM.

The first signal asks for a graceful stop (drain, commit, leave the group; a worker still starting
stops at once, as nothing was consumed); a second one cancels ``scope`` at once, and the command
exits with :data:`EXIT_INTERRUPTED` (only what HBase acknowledged is committed; the next run reads
the rest again).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Protocol

import anyio

from pipeline.cli.logsetup import tell

__all__ = ["EXIT_INTERRUPTED", "Stoppable", "stop_on_signals"]

#: exit status of a command stopped by a signal before it finished
EXIT_INTERRUPTED = 130


class Stoppable(Protocol):
    @property
    def stop_requested(self) -> bool: ...

    def request_stop(self) -> None: ...


async def stop_on_signals(target: Stoppable, scope: anyio.CancelScope, graceful: str | Callable[[], str]) -> None:
    """Until cancelled: the first SIGINT/SIGTERM tells ``received <SIG>: <graceful>`` (the event
    ``signal_received``, :func:`~pipeline.cli.logsetup.tell`; ``graceful`` may be a function giving
    the text when the signal comes) and calls ``target.request_stop()``; the next one tells that it
    stops now and cancels ``scope``."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            name = signal.Signals(sig).name
            if target.stop_requested:
                tell(f"received {name} again: stopping now", "signal_received", signal=name, action="stopping now")
                scope.cancel()
                return
            action = graceful if isinstance(graceful, str) else graceful()
            tell(f"received {name}: {action}", "signal_received", signal=name, action=action)
            target.request_stop()
