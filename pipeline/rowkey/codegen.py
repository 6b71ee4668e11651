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

The read path gets the same treatment (``RowKey.decode(key, verify=False)``): a straight-line
``decode(key)`` that locates every segment with constant offsets or one ``find`` per delimiter and
decodes only the fields, skipping the checks of salts, hashes, buckets and literals::

    def decode(key):  # [salt(host, 16)][host][_][reverse_ts(ts)]
        try:
            x1 = key.find(_term_2, 1)
            if not (x1 >= 0):
                return _slow(key)
            if not (x1 + 9 == len(key)):
                return _slow(key)
            x3 = _unpack_4(key, x1 + 1)[0]
            if not (x3 >= 0):
                return _slow(key)
            return {'host': key[1:x1].decode(), 'ts': 9223372036854775807 - x3}
        except Exception:
            return _slow(key)

Its ``_slow`` is the verified decoder: a key that does not fit the layout, or that a segment decoded
by its own ``decode`` rejects, gets the same :class:`KeyDecodeError` either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.rowkey.errors import RowKeyError

__all__ = ["BuildFn", "CodeGen", "DecodeFn"]

BuildFn = Callable[..., bytes]
DecodeFn = Callable[[bytes], dict[str, Any]]


def _int_text(value: Any) -> bytes:
    """Decimal text of a plain int; anything else leaves the fast path (TypeError)."""
    if value.__class__ is int:
        return str(value).encode()
    raise TypeError("not a plain int")


class CodeGen:
    """Accumulates the generated function's namespace and statements. ``fallback`` is the call a
    failed guard returns (the reference path with the generated function's arguments)."""

    def __init__(self, fallback: str = "_slow(event, rng)") -> None:
        self.fallback = fallback
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
        self.lines.append(f"    return {self.fallback}")

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
        fn: BuildFn = self._compile("build", src, spec)
        fn.__doc__ = f"Build the row key of {spec!r} from one event (generated).\n\n{fn.__doc__}"
        return fn

    def finish_decoder(self, result: str, slow: DecodeFn, spec: str) -> DecodeFn:
        """Compile ``def decode(key)`` returning ``result``; ``slow`` is the verified decoder."""
        self.ns["_slow"] = slow
        src = ["def decode(key):", "    try:"]
        src += [f"        {line}" for line in [*self.lines, f"return {result}"]]
        src += ["    except Exception:", "        return _slow(key)"]
        fn: DecodeFn = self._compile("decode", src, spec)
        fn.__doc__ = (
            f"Decode a key of {spec!r} without verifying its salt/hash/bucket/literal bytes "
            f"(generated).\n\n{fn.__doc__}"
        )
        return fn

    def _compile(self, name: str, src: list[str], spec: str) -> Any:
        source = "\n".join(src) + "\n"
        code = compile(source, f"<rowkey {spec}>", "exec")
        exec(code, self.ns)
        fn = self.ns[name]
        fn.__doc__ = source
        return fn
