"""Why a server process died, read from the tail of its log (pure: lines in, a diagnosis out).

A server *died* when its pid file is still there (only ``stack down`` removes it) but the process is
gone. :func:`death_cause` picks the log lines that say why, strongest evidence first:

1. ``java.lang.OutOfMemoryError`` (the JVMs run with ``-XX:OnOutOfMemoryError="kill -9 %p"``);
2. an abort: ``ABORTING``, ``FATAL``, ``YouAreDeadException``, a master or region server abort;
3. a port already taken (``BindException``, ``Address already in use``);
4. an ``ERROR`` line or exception message among the last ``_LAST_WORDS`` lines (stack frames are
   skipped): an error logged long before the end is not why the process ended.

Only the lines after the last :data:`START_MARKER` count (the stack writes one into the log before each
start; a log holds every run of its server). Lines of the strongest class present are quoted (the last
``limit`` of them, in log order). A log with none of these (a SIGKILL, the kernel's OOM killer) yields
its last non-blank lines, and :attr:`Diagnosis.explained` is False so the caller can say the log gives
no reason. :meth:`DiedProcess.describe` quotes them (``stack status``); :meth:`DiedProcess.headline`
is the one line a failed start-up quotes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["START_MARKER", "Diagnosis", "DiedProcess", "death_cause"]

START_MARKER = "==== hbase-ingest stack: starting "
_CLASSES = (
    re.compile(r"java\.lang\.OutOfMemoryError"),
    # the markers in capitals as HBase and log4j write them ("non-fatal" is not one); the abort phrases in any case
    re.compile(r"ABORTING|\bFATAL\b|YouAreDeadException|(?i:master server abort|region server .* abort)"),
    re.compile(r"BindException|Address already in use"),
)
_LAST_ERROR = re.compile(r"\bERROR\b|^\S*(Exception|Error)\b|Exception:")
_LAST_WORDS = 10
_ERROR_LINE = re.compile(r"\b(ERROR|FATAL)\b|Exception\b|Error\b")
_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")
_MAX_LINE = 400


@dataclass(frozen=True)
class Diagnosis:
    """The quoted lines and whether they explain the death (False: just the log's last lines)."""

    lines: tuple[str, ...]
    explained: bool


@dataclass(frozen=True)
class DiedProcess:
    """A server the stack started that is gone while its pid file remains."""

    name: str
    pid: int
    log: Path
    diagnosis: Diagnosis

    def headline(self, width: int = 200) -> str:
        """One line saying why: the strongest line the log gives (of the quoted lines, the last one that is
        an error or names an exception, else the last one; its timestamp and level kept), or, when the log
        explains nothing, that it ends without an error and its last line. A quoted line is cut to
        ``width`` characters."""
        lines = [line.strip() for line in self.diagnosis.lines]
        # of several lines of one class (an abort logs "ABORTING ..." at ERROR, then "aborting server" at
        # INFO), the last one logged as an error names the cause
        errors = [line for line in lines if _ERROR_LINE.search(line)] if self.diagnosis.explained else []
        last = (errors or lines or [""])[-1]
        quoted = last if len(last) <= width else last[:width - 3] + "..."
        if self.diagnosis.explained and quoted:
            return f"its log says: {quoted}"
        ending = f"; its last line: {quoted}" if quoted else ""
        return f"its log ends without an error (killed by a signal, or by the kernel's OOM killer?){ending}"

    def describe(self) -> str:
        """Several lines: what died, where its log is, and the quoted lines."""
        head = f"{self.name} (pid {self.pid}) died; its log: {self.log}"
        if self.diagnosis.explained:
            head += "\n  the log says:"
        else:
            head += ("\n  its log ends without an error (killed by a signal such as SIGKILL, or by the kernel's "
                     "OOM killer?); last lines:")
        return "\n".join([head, *(f"    {line}" for line in self.diagnosis.lines)])


def death_cause(lines: Sequence[str], limit: int = 3) -> Diagnosis:
    """The lines of ``lines`` (a log's tail, oldest first) that say why the process ended."""
    starts = [i for i, line in enumerate(lines) if line.startswith(START_MARKER)]
    run = lines[starts[-1] + 1:] if starts else lines
    text = [line.rstrip()[:_MAX_LINE] for line in run]
    candidates = [line for line in text if line.strip() and not _FRAME.match(line)]
    searches = [*((pattern, candidates) for pattern in _CLASSES), (_LAST_ERROR, candidates[-_LAST_WORDS:])]
    for pattern, among in searches:
        hits = [line for line in among if pattern.search(line)]
        if hits:
            return Diagnosis(tuple(hits[-limit:]), explained=True)
    return Diagnosis(tuple(candidates[-limit:]), explained=False)
