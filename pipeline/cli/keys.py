"""``hbase-ingest keys``: build, explain, decode and plan row keys from a rowkey spec.

Keys print in HBase shell notation (``\\x00\\x01abc``, as ``Bytes.toStringBinary``) or as hex.
Errors (a bad spec, an event that cannot feed the key, undecodable bytes) print one message to
stderr and exit with status 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from pipeline.cli.errors import check_time_range
from pipeline.rowkey import RowKeyError, compile_rowkey, format_key, parse_key
from pipeline.rowkey.explain import explain
from pipeline.rowkey.splits import split_points

__all__ = ["keys_app"]

keys_app = typer.Typer(
    help="Design and inspect row keys: build a key from an event, explain a layout, decode a key.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: the specs' [segments] are not markup
)

RowkeyOpt = Annotated[
    str, typer.Option("--rowkey", "-r", help="Rowkey spec, e.g. '[salt(id, 16)][id]'.")
]
HexOpt = Annotated[bool, typer.Option("--hex", help="Hex instead of HBase shell escaping.")]


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn our errors and bad input into a message on stderr and exit status 2."""
    try:
        yield
    except (RowKeyError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")  # noqa: TRY004 (bad user input, reported as such)
    return value


def _from_hex(text: str, option: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError(
            f"{option} {text!r} is not hex: with --hex, {option} must be pairs of hexadecimal digits "
            "(0-9, a-f), e.g. 615f00"
        ) from None


def _show(key: bytes, as_hex: bool) -> str:
    return key.hex() if as_hex else format_key(key)


def _run(fn: Callable[[], None]) -> None:
    with _user_errors():
        fn()


@keys_app.command("build")
def build_cmd(
    rowkey: RowkeyOpt,
    event: Annotated[str, typer.Option("--event", "-e", help="The event as a JSON object.")],
    as_hex: HexOpt = False,
) -> None:
    """Build the row key of one event."""

    def go() -> None:
        rk = compile_rowkey(rowkey)
        typer.echo(_show(rk.build(_json_object(event, "--event")), as_hex))

    _run(go)


@keys_app.command("explain")
def explain_cmd(rowkey: RowkeyOpt) -> None:
    """Print the layout: segments, widths, sort orders, query shapes and warnings."""
    _run(lambda: typer.echo(explain(compile_rowkey(rowkey))))


@keys_app.command("decode")
def decode_cmd(
    rowkey: RowkeyOpt,
    key: Annotated[str, typer.Option("--key", "-k", help="The key, escaped (\\x00abc) or hex.")],
    as_hex: Annotated[bool, typer.Option("--hex", help="Read --key as hex.")] = False,
) -> None:
    """Decode a key back to its fields (printed as JSON)."""

    def go() -> None:
        rk = compile_rowkey(rowkey)
        raw = _from_hex(key, "--key") if as_hex else parse_key(key)
        typer.echo(json.dumps(rk.decode(raw), ensure_ascii=False, sort_keys=True))

    _run(go)


@keys_app.command("plan")
def plan_cmd(
    rowkey: RowkeyOpt,
    where: Annotated[str, typer.Option("--where", "-w", help="Field values as JSON.")] = "{}",
    start: Annotated[
        int | None, typer.Option("--from", help="Time range start (epoch ms).")
    ] = None,
    stop: Annotated[int | None, typer.Option("--to", help="Time range end, exclusive.")] = None,
    as_hex: HexOpt = False,
) -> None:
    """Print the key ranges to scan for a query."""

    def go() -> None:
        if (start is None) != (stop is None):
            raise ValueError("--from and --to go together")
        trange = check_time_range(start, stop) if start is not None and stop is not None else None
        plan = compile_rowkey(rowkey).plan(_json_object(where, "--where"), trange)
        typer.echo(
            f"ranges={len(plan.ranges)} fans_out={plan.fans_out} exact={plan.exact} "
            f"per_region={plan.per_region}"
        )
        for r in plan.ranges:
            stop_text = _show(r.stop, as_hex) if r.stop else "(end)"
            typer.echo(f"{r.label}\t{_show(r.start, as_hex)}\t{stop_text}")

    _run(go)


@keys_app.command("splits")
def splits_cmd(
    rowkey: RowkeyOpt,
    regions: Annotated[int, typer.Option("--regions", "-n", help="Number of regions.")],
    as_hex: HexOpt = False,
) -> None:
    """Print pre-split points, one per line."""

    def go() -> None:
        for point in split_points(compile_rowkey(rowkey), regions):
            typer.echo(_show(point, as_hex))

    _run(go)


def _mount_analyze() -> None:
    from pipeline.cli.analyze import register_analyze

    register_analyze(keys_app)


_mount_analyze()
