"""From parsed nodes to :class:`Segment` objects: argument checking and canonical spelling.

Accepted functions (case-insensitive; aliases in parentheses)::

    [f]  text(f) (str, string)       UTF-8 text
    text(f, escaped)                 UTF-8 text, 0x00 escaped, self-terminated; keyword: form=
    [_]  ['#']  lit('x') (literal)   literal bytes
    rpad(f, 'x', 20)  lpad(f, '0', 10)
    dec(f, 10)                       %010d
    md5(f, ..., 4)  md5(f).subStr(0, 4)
    salt(f, ..., 16[, murmur3|md5|phoenix])   salt(16[, hash])   keywords: buckets=, hash=
    mod(f, 16[, byte|text])   [f % 16]
    time_bucket(f, 15m[, text|long|int])
    reverse_ts(f[, bytes|text])   [Long.MAX_VALUE - f]
    reverse(f)
    random(100[, byte|text])  (rand)
    long(f[, ordered|desc])  int(f[, ordered|desc])  olong(f)  oint(f)
    code(f, {Taobao: tb, JD: jd}[, default])   keyword: default=
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.rowkey.errors import SpecSyntaxError
from pipeline.rowkey.segments import Segment
from pipeline.rowkey.segments_dist import KeySalt, Md5, Mod, Random, Salt
from pipeline.rowkey.segments_num import Dec, Int, Long, ReverseTs, TimeBucket
from pipeline.rowkey.segments_text import Code, EscapedText, Literal, LPad, Reverse, RPad, Text
from pipeline.rowkey.spec import Arg, Node, parse_spec

__all__ = ["compile_segments"]

_HASH_ALIASES = {
    "murmur3": "murmur3",
    "murmur": "murmur3",
    "mmh3": "murmur3",
    "md5": "md5",
    "phoenix": "phoenix",
    "java": "phoenix",
}


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class _Args:
    """Positional/keyword access with errors that point at the argument."""

    def __init__(self, spec: str, node: Node) -> None:
        self.spec = spec
        self.node = node
        self.pos = [a for a in node.args if a.key is None]
        self.kw = {a.key: a for a in node.args if a.key is not None}

    def error(self, message: str, arg: Arg | None = None) -> SpecSyntaxError:
        return SpecSyntaxError(message, self.spec, arg.pos if arg else self.node.pos + 1)

    def names(self) -> list[Arg]:
        """Leading positional name arguments (the fields)."""
        out: list[Arg] = []
        for a in self.pos:
            if a.kind != "name":
                break
            out.append(a)
        return out

    def field(self) -> tuple[str, Arg]:
        if not self.pos or self.pos[0].kind != "name":
            raise self.error(
                f"{self.node.func}() needs a field name as its first argument",
                self.pos[0] if self.pos else None,
            )
        return self.pos[0].value, self.pos[0]

    def of_kind(self, kind: str, start: int = 1) -> list[Arg]:
        return [a for a in self.pos[start:] if a.kind == kind]

    def check_count(self, allowed: int) -> None:
        if len(self.pos) > allowed:
            raise self.error(f"too many arguments for {self.node.func}()", self.pos[allowed])

    def option(self, start: int, choices: dict[str, str], default: str, key: str = "") -> str:
        arg = self.kw.get(key) if key else None
        opts = [a for a in self.pos[start:] if a.kind == "name"]
        if arg is None and opts:
            arg = opts[0]
        if arg is None:
            return default
        value = str(arg.value).lower()
        if value not in choices:
            raise self.error(
                f"unknown option {arg.value!r}; expected one of {', '.join(choices)}", arg
            )
        return choices[value]

    def int_in(self, arg: Arg | None, lo: int, hi: int, what: str) -> int:
        if arg is None:
            raise self.error(f"{self.node.func}() needs {what}")
        if arg.kind != "int" or not lo <= arg.value <= hi:
            raise self.error(f"{what} must be an integer in {lo}..{hi}", arg)
        return int(arg.value)


def _text(a: _Args) -> Segment:
    field, _ = a.field()
    a.check_count(2)
    for key, arg in a.kw.items():
        if key != "form":
            raise a.error(f"unknown keyword {key}= for {a.node.func}(); expected form=", arg)
    if len(a.pos) > 1 and a.pos[1].kind != "name":
        raise a.error(
            f"{a.node.func}() takes a field and an option (escaped), got {a.pos[1].kind}",
            a.pos[1],
        )
    if len(a.pos) > 1 and "form" in a.kw:
        raise a.error(f"the option of {a.node.func}() is given twice", a.kw["form"])
    form = a.option(1, {"escaped": "escaped"}, "plain", "form")
    if form == "escaped":
        return EscapedText(f"text({field}, escaped)", (field,), None, a.node.pos)
    return Text(field, (field,), None, a.node.pos)


def _literal(a: _Args) -> Segment:
    strs = [x for x in a.node.args if x.kind == "str"]
    if len(a.node.args) != 1 or not strs or not strs[0].value:
        raise a.error("a literal needs one non-empty quoted string")
    return Literal(a.node.text or repr(strs[0].value), _bytes(strs[0].value), a.node.pos)


def _pad(a: _Args) -> Segment:
    field, _ = a.field()
    a.check_count(3)
    strs, ints = a.of_kind("str"), a.of_kind("int")
    if len(strs) != 1 or len(_bytes(strs[0].value)) != 1:
        raise a.error(
            f"{a.node.func}() needs one pad character that is a single byte",
            strs[0] if strs else None,
        )
    width = a.int_in(ints[0] if ints else None, 1, 65535, "a width")
    pad = _bytes(strs[0].value)
    cls = RPad if a.node.func == "rpad" else LPad
    return cls(f"{a.node.func}({field}, {strs[0].value!r}, {width})", field, pad, width, a.node.pos)


def _dec(a: _Args) -> Segment:
    field, _ = a.field()
    a.check_count(2)
    ints = a.of_kind("int")
    width = a.int_in(ints[0] if ints else None, 1, 20, "a digit count")
    return Dec(f"dec({field}, {width})", field, width, a.node.pos)


def _md5(a: _Args) -> Segment:
    names = a.names()
    if not names:
        raise a.error("md5() needs at least one field")
    rest = a.pos[len(names) :]
    n = a.int_in(rest[0], 1, 32, "a hex prefix length") if rest else 32
    if len(rest) > 1:
        raise a.error("too many arguments for md5()", rest[1])
    fields = tuple(x.value for x in names)
    return Md5(f"md5({', '.join(fields)}, {n})", fields, n, a.node.pos)


def _salt(a: _Args) -> Segment:
    names = a.names()
    rest = a.pos[len(names) :]
    bucket_arg = a.kw.get("buckets") or (rest[0] if rest else None)
    buckets = a.int_in(bucket_arg, 1, 256, "a bucket count")
    opt_start = len(names) + (1 if rest and rest[0] is bucket_arg else 0)
    hash_name = a.option(opt_start, _HASH_ALIASES, "murmur3", "hash")
    if len(a.pos) > opt_start + 1:
        raise a.error("too many arguments for salt()", a.pos[opt_start + 1])
    fields = tuple(x.value for x in names)
    inner = ", ".join([*fields, str(buckets)]) + (
        "" if hash_name == "murmur3" else f", {hash_name}"
    )
    cls = Salt if fields else KeySalt
    return cls(f"salt({inner})", fields, buckets, hash_name, a.node.pos)


def _mod(a: _Args) -> Segment:
    field, _ = a.field()
    ints = a.of_kind("int")
    n = a.int_in(ints[0] if ints else None, 1, 1 << 32, "a bucket count")
    form = a.option(2, {"byte": "byte", "bytes": "byte", "text": "text"}, "byte", "form")
    a.check_count(3)
    suffix = ", text" if form == "text" else ""
    return Mod(f"mod({field}, {n}{suffix})", (field,), n, form == "text", a.node.pos)


def _random(a: _Args) -> Segment:
    ints = [x for x in a.pos if x.kind == "int"]
    n = a.int_in(ints[0] if ints else None, 1, 1 << 32, "a value count")
    form = a.option(1, {"byte": "byte", "bytes": "byte", "text": "text"}, "byte", "form")
    a.check_count(2)
    suffix = ", text" if form == "text" else ""
    return Random(f"random({n}{suffix})", (), n, form == "text", a.node.pos)


def _time_bucket(a: _Args) -> Segment:
    field, _ = a.field()
    widths = [x for x in a.pos[1:] if x.kind in ("duration", "int")]
    if not widths or widths[0].value <= 0:
        raise a.error(
            "time_bucket() needs a width such as 15m, 1h, 1d or 30s", widths[0] if widths else None
        )
    form = a.option(2, {"text": "text", "long": "long", "int": "int"}, "text", "form")
    a.check_count(3)
    width_text = a.spec[widths[0].pos :].split(",")[0].split(")")[0].strip()
    suffix = "" if form == "text" else f", {form}"
    return TimeBucket(
        f"time_bucket({field}, {width_text}{suffix})", field, widths[0].value, form, a.node.pos
    )


def _reverse_ts(a: _Args) -> Segment:
    field, _ = a.field()
    form = a.option(
        1, {"bytes": "bytes", "binary": "bytes", "long": "bytes", "text": "text"}, "bytes", "form"
    )
    a.check_count(2)
    return ReverseTs(
        f"reverse_ts({field}{', text' if form == 'text' else ''})",
        field,
        form == "text",
        a.node.pos,
    )


def _reverse(a: _Args) -> Segment:
    field, _ = a.field()
    a.check_count(1)
    return Reverse(f"reverse({field})", (field,), None, a.node.pos)


def _binary(a: _Args) -> Segment:
    field, _ = a.field()
    func = a.node.func
    base = {"long": "long", "olong": "long", "bigint": "long", "int": "int", "oint": "int"}[func]
    default = "ordered" if func in ("olong", "oint") else "plain"
    variant = a.option(
        1,
        {
            "ordered": "ordered",
            "asc": "ordered",
            "desc": "desc",
            "descending": "desc",
            "plain": "plain",
        },
        default,
        "order",
    )
    a.check_count(2)
    suffix = "" if variant == "plain" else f", {variant}"
    cls = Long if base == "long" else Int
    return cls(f"{base}({field}{suffix})", field, variant, a.node.pos)


def _code(a: _Args) -> Segment:
    field, _ = a.field()
    dicts = a.of_kind("dict")
    if len(dicts) != 1 or not dicts[0].value:
        raise a.error(
            "code() needs a non-empty dictionary like {Taobao: tb}", dicts[0] if dicts else None
        )
    table: dict[str, str] = dicts[0].value
    if any(not c for c in table.values()):
        raise a.error("codes must not be empty", dicts[0])
    extra = [x for x in a.pos[1:] if x is not dicts[0]]
    dflt = a.kw.get("default") or (extra[0] if extra else None)
    if len(extra) > 1:
        raise a.error("too many arguments for code()", extra[1])
    if dflt is not None and (dflt.kind not in ("str", "name", "int") or str(dflt.value) == ""):
        raise a.error("the default code must be a non-empty word or string", dflt)
    default = _bytes(str(dflt.value)) if dflt is not None else None
    codes = {k: _bytes(v) for k, v in table.items()}
    body = ", ".join(f"{k}: {v}" for k, v in table.items())
    tail = f", default={dflt.value}" if dflt is not None else ""
    return Code(f"code({field}, {{{body}}}{tail})", field, codes, default, a.node.pos)


_FUNCS: dict[str, Callable[[_Args], Segment]] = {
    "field": _text,
    "text": _text,
    "str": _text,
    "string": _text,
    "literal": _literal,
    "lit": _literal,
    "rpad": _pad,
    "lpad": _pad,
    "dec": _dec,
    "md5": _md5,
    "salt": _salt,
    "mod": _mod,
    "random": _random,
    "rand": _random,
    "time_bucket": _time_bucket,
    "timebucket": _time_bucket,
    "reverse_ts": _reverse_ts,
    "reversets": _reverse_ts,
    "reverse": _reverse,
    "long": _binary,
    "olong": _binary,
    "bigint": _binary,
    "int": _binary,
    "oint": _binary,
    "code": _code,
}


def compile_segments(spec: str) -> tuple[Segment, ...]:
    """Parse and check ``spec``; raises SpecSyntaxError pointing at the problem."""
    segments: list[Segment] = []
    for node in parse_spec(spec):
        make = _FUNCS.get(node.func)
        if make is None:
            known = ", ".join(sorted(k for k in _FUNCS if k != "field"))
            raise SpecSyntaxError(
                f"unknown function {node.func!r} (known: {known})", spec, node.pos + 1
            )
        seg = make(_Args(spec, node))
        if isinstance(seg, KeySalt) and segments:
            raise SpecSyntaxError(
                "salt() without fields hashes the rest of the key, so it must be the first segment",
                spec,
                node.pos + 1,
            )
        segments.append(seg)
    return tuple(segments)
