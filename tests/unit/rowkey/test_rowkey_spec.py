"""Spec notation: accepted spellings, segment introspection and syntax errors with a caret."""

from __future__ import annotations

import pytest

from pipeline.rowkey import PlanError, SpecSyntaxError, compile_rowkey


@pytest.mark.parametrize(
    ("spec", "kinds"),
    [
        ("[md5(user_id, 4)][user_id][order_id]", ["md5", "text", "text"]),
        ("[MD5(user_id).subStr(0, 4)][user_id]", ["md5", "text"]),
        ("[md5(user_id).substring(0, 8)][_][user_id]", ["md5", "literal", "text"]),
        ("[reverse(user_id)][order_id]", ["reverse", "text"]),
        ("[user_id][order_id][random(100)]", ["text", "text", "random"]),
        ("[user_id][order_id][random( 100)]", ["text", "text", "random"]),
        ("[timestamp % 16][timestamp]", ["mod", "text"]),
        ("[Long.MAX_VALUE - timestamp]", ["reverse_ts"]),
        ("[Long.MAX_VALUE-timestamp]", ["reverse_ts"]),
        ("[rpad(column1, 'x', 20)][column2]", ["rpad", "text"]),
        ("[column1][_][column2]", ["text", "literal", "text"]),
        ("[column1]['#'][column2]", ["text", "literal", "text"]),
        ('[column1]["|"][column2]', ["text", "literal", "text"]),
        ("[salt(user_id, 16)][user_id][long(ts)]", ["salt", "text", "long"]),
        ("[salt(16)][user_id]", ["salt", "text"]),
        ("[code(platform, {Taobao: tb})][user_id]", ["code", "text"]),
        ("[time_bucket(timestamp, 15m)][host][metric]", ["time_bucket", "text", "text"]),
        (
            "[text(a)][str(b)][Long(c)][int(d, desc)][oint(e)][dec(f, 4)]",
            ["text", "text", "long", "int", "int", "dec"],
        ),
        ("  [a]  [b]  ", ["text", "text"]),
        ("[text(a, escaped)][b][str(c, escaped)]", ["escaped_text", "text", "escaped_text"]),
    ],
)
def test_accepted_spellings(spec: str, kinds: list[str]) -> None:
    assert [s.kind for s in compile_rowkey(spec).segments] == kinds


def test_canonical_sources_and_fields() -> None:
    rk = compile_rowkey(
        "[MD5(user_id).subStr(0, 4)][timestamp % 16][Long.MAX_VALUE - ts]"
        "[salt(h, m, 16, phoenix)][user.id][log-event]"
    )
    assert [s.source for s in rk.segments] == [
        "md5(user_id, 4)",
        "mod(timestamp, 16)",
        "reverse_ts(ts)",
        "salt(h, m, 16, phoenix)",
        "user.id",
        "log-event",
    ]
    assert rk.fields == ("user_id", "timestamp", "ts", "h", "m", "user.id", "log-event")


def test_segments_describe_width_and_order() -> None:
    rk = compile_rowkey("[salt(a, 16)][a][_][long(ts)][reverse_ts(t2)][rpad(b, 'x', 5)]")
    assert [s.width for s in rk.segments] == [1, None, 1, 8, 8, 5]
    assert "descending" in rk.segments[4].order
    assert rk.max_length is None and rk.min_length == 23


@pytest.mark.parametrize(
    ("spec", "position", "message"),
    [
        ("", 0, "empty rowkey spec"),
        ("user_id", 0, "expected '['"),
        ("[user_id", 8, "expected ']'"),
        ("[a][]", 4, "empty segment"),
        ("[md5(user_id,)]", 13, "expected an argument"),
        ("[md5(user_id, 40)]", 14, "hex prefix length"),
        ("[md5(user_id).subStr(1, 4)]", 21, "must start at 0"),
        ("[md5(user_id).upper()]", 14, "unknown method"),
        ("[salt(user_id)]", 1, "bucket count"),
        ("[salt(user_id, 300)]", 15, "bucket count"),
        ("[salt(user_id, 16, sha1)]", 19, "unknown option"),
        ("[a][salt(16)]", 4, "must be the first segment"),
        ("[frobnicate(a)]", 1, "unknown function"),
        ("[rpad(a, 'xy', 3)]", 9, "single byte"),
        ("[rpad(a, 'x')]", 1, "width"),
        ("[time_bucket(ts, 15q)]", 17, "bad duration"),
        ("[time_bucket(ts)]", 1, "width"),
        ("[code(p, {})]", 9, "non-empty dictionary"),
        ("[code(p, {a: x, a: y})]", 16, "duplicate key"),
        ("[a]['unterminated]", 4, "unterminated string"),
        ("[1abc]", 1, "cannot start with a number"),
        ("[long(x, sideways)]", 9, "unknown option"),
        ("[a % b]", 5, "expected a number"),
        ("[dec(n, 0)]", 8, "digit count"),
        ("[random()]", 1, "value count"),
        ("[a][b]x", 6, "expected '['"),
    ],
)
def test_syntax_errors_point_at_the_position(spec: str, position: int, message: str) -> None:
    with pytest.raises(SpecSyntaxError) as info:
        compile_rowkey(spec)
    err = info.value
    assert message in str(err)
    assert err.spec == spec
    assert err.position == position, str(err)
    lines = str(err).splitlines()
    assert lines[1] == "  " + spec and lines[2] == "  " + " " * position + "^"


def test_time_field_must_be_a_field() -> None:
    with pytest.raises(PlanError):
        compile_rowkey("[a]", time_field="ts")


def test_time_field_inference() -> None:
    assert compile_rowkey("[a][_][reverse_ts(t)]").time_field == "t"
    assert compile_rowkey("[a][_][long(event_ts)]").time_field == "event_ts"
    assert compile_rowkey("[a][_][long(n)]").time_field is None
    assert compile_rowkey("[a][_][long(n)]", time_field="n").time_field == "n"
    assert compile_rowkey("[reverse_ts(a)][reverse_ts(b)]").time_field is None


def test_rowkey_is_immutable_and_hashable() -> None:
    rk = compile_rowkey("[a]")
    with pytest.raises(AttributeError):
        rk.spec = "[b]"
    assert rk == compile_rowkey("[a]") and hash(rk) == hash(compile_rowkey("[a]"))
    assert repr(rk) == "RowKey('[a]')"
