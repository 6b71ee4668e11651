"""Generation of the specialised ``build`` function for one compiled spec.

Each segment contributes a Python expression for its bytes (and, when needed, guard statements).
The result is a straight-line function with no per-event parsing and no branching on segment kinds::

    def build(event, rng=None):
        try:
            v0 = event['user_id']
            t0 = v0.encode() if v0.__class__ is str else _text(v0)
            v1 = event['ts']
            if not (v1.__class__ is int and -9223372036854775808 <= v1 <= 9223372036854775807):
                return _slow(event, rng)
            ...
            return _b_1[_h_0(t0, 0, False) % 16] + t0 + _pack_q(v1) + ...
        except _RowKeyError:
            raise
        except Exception:
            return _slow(event, rng)

Guards only decide between this fast path and ``_slow``, the reference interpreter, which builds the
same bytes or raises the precise :class:`EventFieldError`. Anything unexpected on the fast path
(a missing key, a wrong type) therefore ends in the reference path's diagnosis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.rowkey.errors import RowKeyError

__all__ = ["BuildFn", "CodeGen"]

BuildFn = Callable[..., bytes]


def _int_text(value: Any) -> bytes:
    """Decimal text of a plain int; anything else leaves the fast path (TypeError)."""
    if value.__class__ is int:
        return str(value).encode()
    raise TypeError("not a plain int")


class CodeGen:
    """Accumulates the generated function's namespace and statements."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"_RowKeyError": RowKeyError, "_text": _int_text}
        self.lines: list[str] = []
        self._values: dict[str, str] = {}
        self._texts: dict[str, str] = {}
        self._n = 0
        self.uses_rng = False

    def rng(self) -> str:
        """The variable holding the random source (the call's ``rng`` or the compiled default)."""
        self.uses_rng = True
        return "rng"

    def const(self, value: Any, hint: str = "c") -> str:
        """Bind ``value`` to a fresh name in the generated function's globals."""
        for name, existing in self.ns.items():
            if existing is value and name.startswith(f"_{hint}_"):
                return name
        self._n += 1
        name = f"_{hint}_{self._n}"
        self.ns[name] = value
        return name

    def tmp(self) -> str:
        self._n += 1
        return f"x{self._n}"

    def stmt(self, code: str) -> None:
        self.lines.append(code)

    def guard(self, condition: str) -> None:
        """Leave the fast path for the reference path unless ``condition`` holds."""
        self.lines.append(f"if not ({condition}):")
        self.lines.append("    return _slow(event, rng)")

    def value(self, field: str, path: tuple[str, ...]) -> str:
        """The variable holding the raw event value of ``field`` (fetched once)."""
        var = self._values.get(field)
        if var is None:
            var = f"v{len(self._values)}"
            lookup = "".join(f"[{part!r}]" for part in path)
            self.lines.append(f"{var} = event{lookup}")
            self._values[field] = var
        return var

    def text(self, field: str, path: tuple[str, ...]) -> str:
        """The variable holding the UTF-8 bytes of ``field``'s text (computed once)."""
        var = self._texts.get(field)
        if var is None:
            v = self.value(field, path)
            var = f"t{len(self._texts)}"
            self.lines.append(f"{var} = {v}.encode() if {v}.__class__ is str else _text({v})")
            self._texts[field] = var
        return var

    def finish(self, result: str, slow: BuildFn, rng_default: Any, spec: str) -> BuildFn:
        """Compile ``def build(event, rng=None)`` returning ``result``."""
        self.ns["_slow"] = slow
        self.ns["_rng_default"] = rng_default
        head = ["if rng is None:", "    rng = _rng_default"] if self.uses_rng else []
        body = [*head, *self.lines, f"return {result}"]
        src = ["def build(event, rng=None):", "    try:"]
        src += [f"        {line}" for line in body]
        src += [
            "    except _RowKeyError:",
            "        raise",
            "    except Exception:",
            "        return _slow(event, rng)",
        ]
        source = "\n".join(src) + "\n"
        code = compile(source, f"<rowkey {spec}>", "exec")
        exec(code, self.ns)
        fn: BuildFn = self.ns["build"]
        fn.__doc__ = f"Build the row key of {spec!r} from one event (generated).\n\n{source}"
        return fn
