"""``hbase-ingest stack up | status | down``.

The local stack is a test bed, not part of the worker: its package, ``devstack``, is imported by
the commands when they run (:func:`~pipeline.cli.errors.check_devstack` says so when it is missing),
never when the CLI is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.cli.console import output_console
from pipeline.cli.errors import check_devstack
from pipeline.cli.logsetup import quiet_kafka_repeats
from pipeline.errors import ConfigError

if TYPE_CHECKING:
    from devstack import LocalStack, StackStatus
    from devstack.settings import StackSettings

__all__ = ["stack_app"]

stack_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None)
_console = output_console()

ConfigOpt = typer.Option(None, "--config", "-c", help="TOML profile ([stack] section: ports, heaps, dirs).")
RegionServersOpt = typer.Option(
    None, "--region-servers", min=0, max=16,
    help="region server JVMs of a local cluster ([stack] region_servers); 0: the one-JVM stack")
GatewaysOpt = typer.Option(
    None, "--gateways", min=0, max=16,
    help="Thrift1+Thrift2 gateway JVMs of a local cluster ([stack] gateways); 0: the one-JVM stack")


SecureOpt = typer.Option(
    False, "--secure",
    help="also a SASL_SSL listener on Kafka (SCRAM-SHA-512 users, TLS from a CA the stack makes, ACLs; "
         "[stack] secure); restarts a running Kafka that lacks it")


HdfsOpt = typer.Option(
    False, "--hdfs",
    help="a local cluster's HBase on HDFS (a NameNode and [stack] datanodes DataNodes) instead of the local "
         "filesystem, as in production: a region server declared dead is fenced off its WALs ([stack] hdfs); "
         "needs --region-servers and --gateways")


CdcOpt = typer.Option(
    False, "--cdc",
    help="also PostgreSQL 15 (wal_level=logical) and Kafka Connect running Debezium's PostgreSQL connector "
         "([stack] cdc); added to a running stack without restarting it")


RegistryOpt = typer.Option(
    False, "--registry",
    help="also a schema registry, Apicurio Registry, with a Confluent-compatible API on [stack] registry_port "
         "([stack] registry); added to a running stack without restarting it")


KerberosOpt = typer.Option(
    False, "--kerberos",
    help="also a KDC of a private realm; standalone: a Kerberized HBase beside the plain one, with plain, SASL "
         "(auth-conf) and HTTPS+SPNEGO Thrift1/Thrift2 gateways on ports 9690..9695, added to a running stack "
         "without restarting it; with --region-servers/--gateways: the cluster itself Kerberized, each gateway "
         "serving SASL and HTTPS+SPNEGO on 9692..9695 + 10 * j beside plain Thrift (not with --hdfs)")


NetnsOpt = typer.Option(
    False, "--netns",
    help="each server of a local cluster in a network namespace of its own on a bridge (root; [stack] netns, "
         "netns_prefix, netns_subnet), Kafka on loopback: faults can cut links between servers; needs "
         "--region-servers and --gateways")


def _settings(config: Path | None, region_servers: int | None, gateways: int | None,
              secure: bool = False, cdc: bool = False, hdfs: bool = False, registry: bool = False,
              kerberos: bool = False, netns: bool = False) -> StackSettings:
    check_devstack("hbase-ingest stack")
    from devstack.settings import StackSettings, load_stack_settings

    base = load_stack_settings(config)
    shape: dict[str, object] = {
        k: v for k, v in (("region_servers", region_servers), ("gateways", gateways)) if v is not None}
    if secure:
        shape["secure"] = True
    if cdc:
        shape["cdc"] = True
    if hdfs:
        shape["hdfs"] = True
    if registry:
        shape["registry"] = True
    if kerberos:
        shape["kerberos"] = True
    if netns:
        shape["netns"] = True
    if not shape:
        return base
    try:
        return StackSettings.model_validate({**base.model_dump(), **shape})
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        what = ("--hdfs" if hdfs and "hdfs" in msg else "--netns" if netns and "netns" in msg
                else "--region-servers/--gateways")
        raise ConfigError(f"{what}: {exc.errors()[0]['msg']}") from exc


def _recorded(config: Path | None) -> LocalStack:
    """The stack the last ``up`` started in the configured state folder (its shape included)."""
    check_devstack("hbase-ingest stack")
    from devstack import LocalStack
    from devstack.settings import load_stack_settings

    return LocalStack.recorded(load_stack_settings(config))


def _print_deaths(stack_dead: list[str]) -> None:
    for text in stack_dead:
        _console.print(f"[red]died[/red]: {escape(text)}", soft_wrap=True)


@stack_app.command()
def up(config: Path | None = ConfigOpt, region_servers: int | None = RegionServersOpt,
       gateways: int | None = GatewaysOpt, secure: bool = SecureOpt, cdc: bool = CdcOpt,
       hdfs: bool = HdfsOpt, registry: bool = RegistryOpt, kerberos: bool = KerberosOpt,
       netns: bool = NetnsOpt) -> None:
    """Provision (first run downloads jars into the user cache) and start Kafka + HBase + Thrift; wait
    until real round trips succeed. Returns at once when the stack already runs. With --region-servers
    N --gateways M: ZooKeeper, a master, N region servers and M gateways, each its own JVM. With --cdc:
    also PostgreSQL and Kafka Connect with Debezium, ready once a row comes back from Kafka. With --hdfs
    (a cluster only): HBase's root and WALs on a local HDFS, ready once a file is written and read back.
    With --registry: also Apicurio Registry, ready once a schema is registered and read back by its id.
    With --kerberos: also a KDC and a Kerberized HBase, ready once a ticket is issued from a keytab and
    each of its six Thrift gateways answers a call (SASL and SPNEGO as the client principal)."""
    settings = _settings(config, region_servers, gateways, secure, cdc, hdfs, registry, kerberos, netns)
    from devstack import LocalStack

    stack = LocalStack(settings)
    quiet_kafka_repeats()  # the probes retry a broker that is starting: only the outcome is reported
    report = stack.up()
    _print_deaths([d.describe() + "\n  (restarted by this `stack up`)" for d in report.died])
    t = report.timings_s
    if report.reused:
        _console.print(f"stack already running (reused; checked in {t['total']:.2f} s); state: {stack.layout.state}")
        if stack.secure:
            _print_secure(stack)
        _print_kerberos(stack)
        _print_sso(stack)
        _print_registry(stack)
        _print_cdc(stack)
        return
    src = "downloaded into" if report.downloaded else "reused from"
    _console.print(f"jars {src} {stack.layout.cache} ({t['provision']:.1f} s)")
    _console.print(f"stack ready in {t['total']:.1f} s (servers {t['start']:.1f} s); state: {stack.layout.state}")
    _print_gateways(stack)
    if stack.secure:
        _print_secure(stack)
    _print_kerberos(stack)
    _print_sso(stack)
    _print_registry(stack)
    _print_cdc(stack)


def _print_gateways(stack: LocalStack) -> None:
    if stack.topology().mode == "cluster":
        _console.print("gateways: " + ", ".join(
            f"{g.name} {g.host} thrift1 {g.thrift_port} thrift2 {g.thrift2_port}" for g in stack.gateways))
        _console.print(f"HBase root: {stack.hbase_root}", soft_wrap=True)


def _print_secure(stack: LocalStack) -> None:
    """Which listener is secured and where its CA and password files are: paths, never contents."""
    for line in stack.kafka_part.status():
        _console.print(line, soft_wrap=True)


def _print_kerberos(stack: LocalStack) -> None:
    """The realm, its krb5.conf and keytabs (paths, never contents), and the Kerberized HBase's listeners."""
    for part in (stack.kdc, stack.kerberized_hbase):
        for line in part.status() if part is not None else ():
            _console.print(line, soft_wrap=True)


def _print_sso(stack: LocalStack) -> None:
    """Kafka's GSSAPI/OAUTHBEARER listener: port, mechanisms, principals (never a secret)."""
    for line in stack.kafka_part.sso_status():
        _console.print(line, soft_wrap=True)


def _print_registry(stack: LocalStack) -> None:
    """Where the schema registry's Confluent-compatible API answers, and where it keeps its schemas."""
    if stack.registry is not None:
        for line in stack.registry.status():
            _console.print(line, soft_wrap=True)


def _print_cdc(stack: LocalStack) -> None:
    """Where PostgreSQL and Kafka Connect listen, who logs in (a password file's path, never its
    contents), and which table goes to which topic."""
    if stack.cdc is not None:
        for line in stack.cdc.status():
            _console.print(line, soft_wrap=True)


def print_processes(st: StackStatus, versions: str = "", console: Console = _console) -> None:
    """The head of ``stack status``: the folders, the versions (``versions`` appended to Kafka's and
    HBase's), one table row per process, every port. Plain text: paths and names are not markup."""
    console.print(f"state folder: {st.state_dir}\njar cache:    {st.cache_dir}", markup=False)
    console.print(f"versions:     Kafka {st.kafka_version}, HBase {st.hbase_version}{versions}; shape: {st.mode}",
                  markup=False)
    table = Table("process", "state", "pid", "RSS MB", "ports", "log")
    for p in st.processes:
        table.add_row(escape(p.name), p.state, str(p.pid or "-"), f"{p.rss_mb:.0f}" if p.rss_mb else "-",
                      escape(" ".join(f"{k} {v}" for k, v in p.ports.items())), escape(str(p.log)))
    console.print(table, soft_wrap=True)
    console.print("ports: " + ", ".join(f"{k} {v}" for k, v in st.ports.items()), markup=False)


@stack_app.command()
def status(config: Path | None = ConfigOpt) -> None:
    """Show the state folder, every process (state, pid, memory, ports, log), any server that died and
    the log lines that say why, and whether the stack answers real round trips."""
    stack = _recorded(config)
    from devstack.layout import APICURIO_VERSION, DEBEZIUM_VERSION
    from devstack.pgserver import POSTGRES_MAJOR

    st = stack.status()
    cdc = f", PostgreSQL {POSTGRES_MAJOR}, Debezium {DEBEZIUM_VERSION}" if stack.cdc is not None else ""
    registry = f", Apicurio Registry {APICURIO_VERSION}" if stack.registry_url is not None else ""
    print_processes(st, registry + cdc)
    _print_gateways(stack)
    _print_secure(stack)
    _print_kerberos(stack)
    _print_sso(stack)
    _print_registry(stack)
    _print_cdc(stack)
    _print_deaths([d.describe() + "\n  (`hbase-ingest stack up` restarts it)" for d in st.died])
    if st.running:
        try:
            stack.check_ready(timeout_s=5.0)
            parts = ["Kafka", "HBase", *(["Kerberos"] if stack.kerberos is not None else []),
                     *(["schema registry"] if stack.registry_url is not None else []),
                     *(["CDC"] if stack.cdc is not None else [])]
            _console.print(f"[green]ready[/green]: {', '.join(parts[:-1])} and {parts[-1]} round trips succeeded")
        except Exception as exc:
            _console.print(f"[yellow]running but not answering[/yellow]: {escape(repr(exc))}")
            raise typer.Exit(1) from exc
    else:
        _console.print("[red]not running: a server died[/red]" if st.died else "[yellow]not running[/yellow]")
        raise typer.Exit(1)


@stack_app.command()
def down(config: Path | None = ConfigOpt,
         wipe: bool = typer.Option(False, "--wipe", help="also delete data and logs")) -> None:
    """Stop the processes the stack started (by pid); --wipe also deletes the state folder."""
    stack = _recorded(config)
    stopped = stack.down(wipe=wipe)
    _console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}" + (" (state wiped)" if wipe else ""))
