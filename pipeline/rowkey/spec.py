"""Parser of rowkey specs: text -> :class:`Node` list (no semantics; see ``compiler``).

Grammar (whitespace allowed between tokens)::

    spec     := segment+
    segment  := "[" body "]"
    body     := PUNCT+                          literal delimiter: [_]  [-]  [#]  [::]
              | STRING                          quoted literal: ['#']  ["\\x00"]
              | "Long.MAX_VALUE" "-" NAME       reverse timestamp
              | NAME ("%" INT)?                 field (a dotted path, hyphens and spaces allowed
                                                inside: user.id, log-event, seller id) or field % n
              | FUNC "(" args? ")" ("." METHOD "(" args ")")*
    args     := arg ("," arg)*
    arg      := (NAME "=")? (INT | DURATION | STRING | NAME | dict)
    dict     := "{" (key ":" value ("," key ":" value)*)? ","? "}"

Function and method names are case-insensitive (``MD5(x)``, ``subStr``). Strings take single or
double quotes and the escapes ``\\\\ \\' \\" \\n \\t \\0 \\xNN`` (``\\xNN`` is the raw byte NN).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from pipeline.rowkey.codecs import parse_duration
from pipeline.rowkey.errors import SpecSyntaxError

__all__ = ["Arg", "Node", "parse_spec"]

_NAME = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_NUMBER = re.compile(r"\d+[A-Za-z]*")
_MAXVAL = re.compile(r"(?i)long\.max_value(?:-(.+))?$")
_PUNCT = frozenset("_-#|:;.~!@$^&*+=/<>?%")
_QUOTES = "'\""
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "0": "\0"}


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument: ``kind`` is ``name``, ``int``, ``str``, ``duration`` (ms) or ``dict``."""

    kind: str
    value: Any
    pos: int
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One segment as written: ``func`` is ``field``, ``literal`` or a lower-cased function name."""

    func: str
    args: tuple[Arg, ...]
    pos: int
    text: str = ""


def parse_spec(spec: str) -> list[Node]:
    """Parse ``spec``; raises SpecSyntaxError pointing at the offending character."""
    return _Parser(spec).parse()


class _Parser:
    def __init__(self, spec: str) -> None:
        self.s = spec
        self.i = 0

    def error(self, message: str, pos: int | None = None) -> SpecSyntaxError:
        return SpecSyntaxError(message, self.s, self.i if pos is None else pos)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def expect(self, ch: str, what: str) -> None:
        if self.peek() != ch:
            found = repr(self.peek()) if self.peek() else "end of spec"
            raise self.error(f"expected {ch!r} {what}, found {found}")
        self.i += 1

    def parse(self) -> list[Node]:
        nodes: list[Node] = []
        self.ws()
        if not self.peek():
            raise self.error("empty rowkey spec: expected segments like [user_id][order_id]")
        while self.peek():
            if self.peek() != "[":
                raise self.error(f"expected '[' to start a segment, found {self.peek()!r}")
            nodes.append(self.segment())
            self.ws()
        return nodes

    def segment(self) -> Node:
        start = self.i
        self.i += 1
        end = self.s.find("]", self.i)
        body = self.s[self.i : end] if end >= 0 else ""
        stripped = body.strip()
        if stripped and all(c in _PUNCT for c in stripped):
            pos = self.i + body.index(stripped[0])
            self.i = end + 1
            return Node("literal", (Arg("str", stripped, pos),), start, stripped)
        self.ws()
        if self.peek() == "]":
            raise self.error("empty segment: expected a field, a literal or a function")
        node = self.expr(start)
        self.ws()
        self.expect("]", f"to close the segment opened at position {start}")
        return replace(node, text=self.s[start + 1 : self.i - 1].strip())

    def name(self) -> str:
        m = _NAME.match(self.s, self.i)
        if not m:
            found = repr(self.peek()) if self.peek() else "end of spec"
            raise self.error(f"expected a field or function name, found {found}")
        self.i = m.end()
        return m.group()

    def expr(self, start: int) -> Node:
        ch = self.peek()
        pos = self.i
        if ch in _QUOTES and ch:
            return Node("literal", (Arg("str", self.string(), pos),), start)
        if ch.isdigit():
            raise self.error("a segment cannot start with a number; quote literals: ['1']")
        name = self.name()
        m = _MAXVAL.match(name)
        if m:
            if m.group(1):
                operand = m.group(1)
                opos = pos + name.index("-") + 1
            else:
                self.ws()
                self.expect("-", "after Long.MAX_VALUE")
                self.ws()
                opos = self.i
                operand = self.name()
            return Node("reverse_ts", (Arg("name", operand, opos),), start)
        name_end = self.i
        self.ws()
        if self.peek() == "(":
            return self.call(name.lower(), start, pos)
        self.i = name_end
        words = [name]
        while True:
            save = self.i
            self.ws()
            if self.i > save and _NAME.match(self.s, self.i):
                words.append(self.name())
            else:
                self.i = save
                break
        field = Arg("name", " ".join(words), pos)
        self.ws()
        if self.peek() == "%":
            self.i += 1
            self.ws()
            npos = self.i
            n = self.number()
            if n.kind != "int":
                raise self.error("expected an integer bucket count after '%'", npos)
            return Node("mod", (field, n), start)
        return Node("field", (field,), start)

    def call(self, func: str, start: int, pos: int) -> Node:
        node = Node(func, self.args(), start)
        while True:
            save = self.i
            self.ws()
            if self.peek() != ".":
                self.i = save
                return node
            self.i += 1
            mpos = self.i
            method = self.name().lower()
            self.ws()
            margs = self.args()
            if method not in ("substr", "substring") or node.func != "md5":
                raise self.error(f"unknown method .{method}() on {node.func}()", mpos)
            if len(margs) != 2 or any(a.kind != "int" for a in margs):
                raise self.error(f".{method}() takes two integers: (0, length)", mpos)
            if margs[0].value != 0:
                raise self.error(f".{method}() must start at 0 (a hash prefix)", margs[0].pos)
            length = margs[1].value - (margs[0].value if method == "substring" else 0)
            node = Node("md5", (*node.args, Arg("int", length, margs[1].pos)), start)

    def args(self) -> tuple[Arg, ...]:
        self.expect("(", "to start the arguments")
        self.ws()
        out: list[Arg] = []
        if self.peek() == ")":
            self.i += 1
            return ()
        while True:
            self.ws()
            out.append(self.arg())
            self.ws()
            if self.peek() == ",":
                self.i += 1
                continue
            self.expect(")", "or ',' in the argument list")
            return tuple(out)

    def arg(self) -> Arg:
        ch, pos = self.peek(), self.i
        if ch and ch in _QUOTES:
            return Arg("str", self.string(), pos)
        if ch == "{":
            return Arg("dict", self.mapping(), pos)
        if ch.isdigit():
            return self.number()
        if _NAME.match(self.s, self.i):
            name = self.name()
            save = self.i
            self.ws()
            if self.peek() == "=":
                self.i += 1
                self.ws()
                return replace(self.arg(), key=name.lower())
            self.i = save
            return Arg("name", name, pos)
        found = repr(ch) if ch else "end of spec"
        raise self.error(f"expected an argument, found {found}")

    def number(self) -> Arg:
        pos = self.i
        m = _NUMBER.match(self.s, self.i)
        if not m:
            raise self.error("expected a number")
        self.i = m.end()
        tok = m.group()
        if tok.isdigit():
            return Arg("int", int(tok), pos)
        ms = parse_duration(tok)
        if ms is None:
            raise self.error(f"bad duration {tok!r}: use a number with ms, s, m, h, d or w", pos)
        return Arg("duration", ms, pos)

    def string(self) -> str:
        quote, start = self.s[self.i], self.i
        self.i += 1
        out: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise self.error("unterminated string", start)
            ch = self.s[self.i]
            if ch == quote:
                self.i += 1
                return "".join(out)
            if ch == "\\":
                nxt = self.s[self.i + 1 : self.i + 2]
                if nxt in _ESCAPES:
                    out.append(_ESCAPES[nxt])
                    self.i += 2
                    continue
                hx = self.s[self.i + 2 : self.i + 4]
                if nxt in "xX" and nxt and re.fullmatch(r"[0-9A-Fa-f]{2}", hx):
                    b = int(hx, 16)
                    out.append(chr(b) if b < 0x80 else chr(0xDC00 + b))
                    self.i += 4
                    continue
                raise self.error("bad escape in string", self.i)
            out.append(ch)
            self.i += 1

    def mapping(self) -> dict[str, str]:
        self.i += 1
        out: dict[str, str] = {}
        while True:
            self.ws()
            if self.peek() == "}":
                self.i += 1
                return out
            kpos = self.i
            key = self.word()
            if key in out:
                raise self.error(f"duplicate key {key!r} in dictionary", kpos)
            self.ws()
            self.expect(":", "between a dictionary key and its code")
            self.ws()
            out[key] = self.word()
            self.ws()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "}":
                raise self.error("expected ',' or '}' in dictionary")

    def word(self) -> str:
        if self.peek() and self.peek() in _QUOTES:
            return self.string()
        m = _WORD.match(self.s, self.i)
        if not m:
            raise self.error("expected a dictionary key or code (quote it if it has spaces)")
        self.i = m.end()
        return m.group()
