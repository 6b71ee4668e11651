"""One typed, validated, frozen configuration: a TOML profile (``config/*.toml``) overridden by
environment variables.

Environment overrides use the prefix ``HBASE_INGEST_`` and ``__`` between nesting levels, e.g.
``HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS=broker:9092``; :mod:`pipeline.settings_env` reads them and
states their rules (JSON lists and sections, tables and routes from the file only, misspelt names).
:mod:`pipeline.settings_files` reads the profile and its includes, and words the error messages.

Every section forbids unknown keys: a misspelt key is an error that names it and lists the valid ones.
``[stack]``, the local test stack's table, is the exception: the worker takes it as given and never
reads it; the stack's commands read it through ``devstack.settings``, which checks it the same way.
Numbers are bounded (no value reaches a C call it would overflow), floats are finite, and topic,
table and route names follow :mod:`pipeline.names`. :func:`load_settings` turns every problem (an
unreadable file, a bad environment variable, pydantic's validation errors) into one
:class:`~pipeline.errors.ConfigError` whose message names each bad key or variable, what was expected
and what was given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pipeline.errors import ConfigError
from pipeline.names import (
    table_name_problem,
    table_prefix_problem,
)
from pipeline.settings_base import (
    INT32_MAX,
    MAX_CPU,
    MAX_MS,
    MAX_PORT,
    MAX_S,
    Section,
    TopicName,
    name_rule,
)
from pipeline.settings_env import (
    ENV_NESTED_DELIMITER,
    ENV_PREFIX,
    NON_SETTING_VARIABLES,
    EnvironmentSource,
    read_environment,
)
from pipeline.settings_files import describe_error, read_toml
from pipeline.settings_specs import (
    REGISTRY_FORMATS,
    ColumnSpec,
    CounterSpec,
    DynamicColumnsSpec,
    FamilySpec,
    RouteSpec,
    TableSpec,
    TopicSpec,
)

__all__ = [
    "ENV_NESTED_DELIMITER",
    "ENV_PREFIX",
    "NON_SETTING_VARIABLES",
    "REGISTRY_FORMATS",
    "BatchBy",
    "ColumnSpec",
    "CounterSpec",
    "DynamicColumnsSpec",
    "FamilySpec",
    "GatewaySpec",
    "HBaseClientKind",
    "HBaseSettings",
    "KafkaSettings",
    "LoggingSettings",
    "MetricsSettings",
    "RegistrySettings",
    "RouteSpec",
    "RuntimeSettings",
    "Settings",
    "TableSpec",
    "TopicSpec",
    "WriterSettings",
    "load_settings",
    "load_settings_as",
]

S = TypeVar("S", bound="Settings")


class KafkaSettings(Section):
    """Kafka client options. Security options are passed through to aiokafka unchanged."""

    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "hbase-ingest"
    group_id: str = "hbase-ingest"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    sasl_password_file: Path | None = Field(
        default=None, description="a file holding the SASL password (one line), instead of sasl_plain_password")
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    # GSSAPI (connectors.kafka.kerberos): the broker's principal is <service>/<domain or the broker's host>@REALM
    sasl_kerberos_service_name: str = Field(default="kafka", min_length=1,
                                            description="the broker's sasl.kerberos.service.name")
    sasl_kerberos_domain_name: str | None = Field(
        default=None, min_length=1,
        description="the host name in the broker's principal; None: the host the client connects to")
    sasl_kerberos_principal: str | None = Field(
        default=None, min_length=1, description="the client's principal (user@REALM); None: the ticket cache's")
    sasl_kerberos_keytab: Path | None = Field(
        default=None, description="tickets from this keytab into a private memory cache, re-acquired as they expire")
    # OAUTHBEARER (connectors.kafka.oauth): a token file, or the OAuth 2 client-credentials grant
    sasl_oauth_token_file: Path | None = Field(
        default=None, description="a file holding the access token, re-read at every login (a sidecar may rotate it)")
    sasl_oauth_token_endpoint_url: str | None = Field(
        default=None, pattern=r"^https?://[^\s/@]+(/\S*)?$",
        description="the OAuth 2 token endpoint (client-credentials grant; no user:password@ in it)")
    sasl_oauth_client_id: str | None = Field(default=None, min_length=1)
    sasl_oauth_client_secret: SecretStr | None = None
    sasl_oauth_client_secret_file: Path | None = Field(
        default=None, description="a file holding the client secret (one line), instead of sasl_oauth_client_secret")
    sasl_oauth_scope: str | None = Field(default=None, min_length=1, description="the scope asked for, if any")
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    dead_letter_topic: TopicName = "hbase-ingest.dead-letter"
    max_poll_records: int = Field(default=2000, ge=1, le=1_000_000)
    fetch_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=INT32_MAX,
                                 description="an int32 in Kafka's protocol")
    fetch_min_bytes: int = Field(
        default=1_048_576, ge=1, le=INT32_MAX,
        description="the broker answers a fetch once this many bytes are ready, or after fetch_max_wait_ms: "
                    "batching at the source (fewer, fuller runs below saturation) for up to fetch_max_wait_ms "
                    "of added latency; 1 answers as soon as a byte is there (docs/performance.md, bench_steady)")
    fetch_max_wait_ms: int = Field(default=250, ge=0, le=MAX_MS,
                                   description="how long the broker holds a fetch for fetch_min_bytes")
    session_timeout_ms: int = Field(default=30_000, ge=1000, le=MAX_MS)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100, le=MAX_MS)
    request_timeout_ms: int = Field(default=30_000, ge=1000, le=MAX_MS)

    @model_validator(mode="after")
    def _one_password_source(self) -> KafkaSettings:
        if self.sasl_plain_password is not None and self.sasl_password_file is not None:
            raise ValueError("sasl_plain_password and sasl_password_file are both set: give the SASL password "
                             "one way (the environment variable or the file), not both")
        return self

    @model_validator(mode="after")
    def _mechanism_fits(self) -> KafkaSettings:
        """GSSAPI and OAUTHBEARER settings that cannot work are refused here, naming the key, rather than
        failing at the first login (connectors.kafka.kerberos and .oauth say what each key does)."""
        mech = self.sasl_mechanism
        if mech in ("GSSAPI", "OAUTHBEARER") and not self.security_protocol.startswith("SASL_"):
            raise ValueError(f'sasl_mechanism = "{mech}" with security_protocol = "{self.security_protocol}": '
                             'SASL runs only on a SASL_SSL (or SASL_PLAINTEXT) listener; set security_protocol')
        kerberos = sorted(k for k in ("sasl_kerberos_principal", "sasl_kerberos_keytab", "sasl_kerberos_domain_name")
                          if getattr(self, k) is not None)
        oauth = sorted(k for k in _OAUTH_KEYS if getattr(self, k) is not None)
        if kerberos and mech != "GSSAPI":
            raise ValueError(f'{", ".join(kerberos)} set but sasl_mechanism is {mech!r}, not "GSSAPI": '
                             'they would be ignored; set sasl_mechanism = "GSSAPI" or remove them')
        if oauth and mech != "OAUTHBEARER":
            raise ValueError(f'{", ".join(oauth)} set but sasl_mechanism is {mech!r}, not "OAUTHBEARER": '
                             'they would be ignored; set sasl_mechanism = "OAUTHBEARER" or remove them')
        if self.sasl_kerberos_keytab is not None and self.sasl_kerberos_principal is None:
            raise ValueError("sasl_kerberos_keytab without sasl_kerberos_principal: name the principal whose keys "
                             "it holds (user@REALM)")
        if self.sasl_kerberos_principal is not None and self.sasl_kerberos_keytab is None:
            raise ValueError("sasl_kerberos_principal without sasl_kerberos_keytab: without a keytab the client "
                             "logs in as the ticket cache's principal (kinit); set the keytab, or remove the principal")
        if mech == "OAUTHBEARER":
            self._check_oauth()
        return self

    def _check_oauth(self) -> None:
        url, file = self.sasl_oauth_token_endpoint_url, self.sasl_oauth_token_file
        if url is None and file is None:
            raise ValueError('sasl_mechanism = "OAUTHBEARER" needs a token source: set sasl_oauth_token_file (a file '
                             "holding the token) or sasl_oauth_token_endpoint_url with sasl_oauth_client_id and "
                             "sasl_oauth_client_secret (or sasl_oauth_client_secret_file)")
        if url is not None and file is not None:
            raise ValueError("sasl_oauth_token_file and sasl_oauth_token_endpoint_url are both set: give the token "
                             "one way")
        secrets = [k for k in ("sasl_oauth_client_secret", "sasl_oauth_client_secret_file")
                   if getattr(self, k) is not None]
        grant = [k for k in ("sasl_oauth_client_id", *secrets, "sasl_oauth_scope") if getattr(self, k) is not None]
        if url is None and grant:
            raise ValueError(f"{', '.join(grant)} set without sasl_oauth_token_endpoint_url: the client-credentials "
                             "grant needs the token endpoint")
        if url is not None and self.sasl_oauth_client_id is None:
            raise ValueError("sasl_oauth_token_endpoint_url without sasl_oauth_client_id: the client-credentials "
                             "grant needs the client id")
        if url is not None and len(secrets) != 1:
            raise ValueError("sasl_oauth_token_endpoint_url needs the client secret one way: sasl_oauth_client_secret "
                             "or sasl_oauth_client_secret_file" + (", not both" if secrets else ""))


#: the OAUTHBEARER keys of :class:`KafkaSettings` (any of them set asks for sasl_mechanism = "OAUTHBEARER")
_OAUTH_KEYS = ("sasl_oauth_token_file", "sasl_oauth_token_endpoint_url", "sasl_oauth_client_id",
               "sasl_oauth_client_secret", "sasl_oauth_client_secret_file", "sasl_oauth_scope")


class RegistrySettings(Section):
    """The schema registry that topics in a registry format (``[[topics]] value_format = "avro"``,
    ``"protobuf"``, ``"json_schema"``) read writer schemas from: Confluent's REST API, or a compatible one
    (Apicurio Registry's ``/apis/ccompat/v7``). ``url`` is the API's base (``http(s)://host:port/path``;
    credentials go in ``username``/``password``, never in the URL). Like the Kafka password, the
    password is never logged; ``password_file`` holds it on one line instead. TLS: ``ca_file`` (else the
    system's CAs), ``cert_file``/``key_file`` for a client certificate. ``timeout_s`` bounds each
    request; a registry that does not answer is retried with backoff, the worker waiting as it does
    for Kafka. ``cache_size``: schemas kept compiled (the oldest beyond it are fetched again when seen)."""

    url: str | None = Field(default=None, pattern=r"^https?://[^\s/@]+(/\S*)?$",
                            description="e.g. http://127.0.0.1:8085/apis/ccompat/v7 (no user:password@ in it)")
    username: str | None = None
    password: SecretStr | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_S)
    cache_size: int = Field(default=1000, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _one_password_source(self) -> RegistrySettings:
        if self.password is not None and self.password_file is not None:
            raise ValueError("password and password_file are both set: give the registry password one way")
        if (self.password is not None or self.password_file is not None) and not self.username:
            raise ValueError("a registry password without a username: set username too")
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file without cert_file: the client certificate is missing")
        return self


def _server_problem(server: str) -> str | None:
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= MAX_PORT:
        return "expected 'host:port' (a region server's address, e.g. 'rs1:16020')"
    return None


class GatewaySpec(Section):
    """One Thrift gateway: Thrift1 on ``port`` and Thrift2 on ``thrift2_port`` of ``host``; ``server``
    (optional, ``host:port``) is the region server it sits with, for region locality."""

    host: str = Field(min_length=1)
    port: int = Field(default=9090, ge=1, le=MAX_PORT)
    thrift2_port: int = Field(default=9091, ge=1, le=MAX_PORT)
    server: Annotated[str, name_rule(_server_problem)] | None = None
    # overrides of the [hbase] keys of the same name for this gateway (None: as [hbase] says)
    transport: Literal["buffered", "framed", "http"] | None = None
    tls: bool | None = None
    auth: Literal["none", "kerberos"] | None = None
    sasl_qop: Literal["auth", "auth-int", "auth-conf"] | None = None

    @property
    def name(self) -> str:
        """``host:port`` (the Thrift1 port): the gateway's label in statistics and metrics."""
        return f"{self.host}:{self.port}"


#: ``[hbase] client``: the Thrift gateways, or HBase's own RPC
HBaseClientKind = Literal["thrift", "native"]


class HBaseSettings(Section):
    """The HBase Thrift gateways: Thrift2 (writes, increments, DDL with split keys, small scan pages) and
    Thrift1 (happybase: scans, region lists).

    ``gateways`` lists several gateways (the client spreads calls over the healthy ones,
    :mod:`connectors.hbase.gateways`); without it, ``host``/``port``/``thrift2_port`` are the one
    gateway. Giving both is an error, as is the same Thrift1 or Thrift2 address twice.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=9090, ge=1, le=MAX_PORT)
    thrift2_port: int = Field(default=9091, ge=1, le=MAX_PORT)
    gateways: list[GatewaySpec] = Field(default_factory=list, max_length=64)
    probe_interval_ms: int = Field(default=2000, ge=100, le=MAX_MS,
                                   description="how often a gateway marked down is probed")
    probe_timeout_ms: int = Field(default=3000, ge=100, le=MAX_MS,
                                  description="per round trip of a probe; a gateway that cannot answer in it stays out")
    pool_size: int = Field(default=8, ge=1, le=256)
    timeout_ms: int = Field(default=30_000, ge=100, le=MAX_MS, description="per-call timeout")
    ddl_timeout_ms: int = Field(default=120_000, ge=1000, le=MAX_MS)
    transport: Literal["buffered", "framed", "http"] = Field(
        default="buffered", description="http: the gateway runs in HTTP mode (hbase.regionserver.thrift.http)")
    protocol: Literal["binary", "compact"] = Field(
        default="binary", description="the gateway's protocol (its -c option for compact). On compact, puts "
        "are encoded through thriftpy2's objects: about 4 x the worker's CPU per event (bench_gateway), "
        "and the gateway spends no less")
    put_encoder: Literal["direct", "thriftpy2"] = Field(
        default="direct", description="how puts are encoded on the binary protocol: direct (straight to bytes, "
        "connectors.hbase.putwire) or thriftpy2 (its objects: the fallback, and the benchmarks' baseline)")
    # security of the gateways (connectors.hbase.transport has the server options each must match);
    # a gateway of `gateways` may override transport, tls, auth and sasl_qop
    tls: bool = Field(default=False, description="TLS to the gateways (hbase.thrift.ssl.enabled); HTTPS in http mode")
    tls_ca_file: Path | None = Field(default=None, description="CA certificates (PEM); None: the system's")
    tls_cert_file: Path | None = Field(default=None, description="client certificate (PEM), when the gateway asks")
    tls_key_file: Path | None = None
    tls_check_hostname: bool = True
    auth: Literal["none", "kerberos"] = Field(
        default="none", description="kerberos: SASL GSSAPI on a socket, SPNEGO in http mode; with client = "
        "native also SASL GSSAPI to the masters and region servers")
    kerberos_principal: str | None = Field(
        default=None, description="the client's principal (user@REALM); None: the ticket cache's default")
    kerberos_keytab: Path | None = Field(
        default=None, description="tickets from this keytab, re-acquired as they expire (else the ticket cache)")
    kerberos_service: str = Field(default="hbase", min_length=1,
                                  description="the gateways' principal is <service>/<gateway host>@REALM; "
                                  "with client = native, the masters' and region servers' <service>/<host>@REALM")
    kerberos_http_service: str = Field(default="HTTP", min_length=1,
                                       description="SPNEGO: <http service>/<gateway host>@REALM")
    sasl_qop: Literal["auth", "auth-int", "auth-conf"] = Field(
        default="auth-conf", description="must be what hbase.thrift.security.qop offers (auth-conf = privacy); "
        "with client = native also among what the servers' hbase.rpc.protection allows (authentication = auth, "
        "integrity = auth-int, privacy = auth-conf)")
    http_path: str = Field(default="/", pattern=r"^/", description="http mode: the path of the POSTs")
    table_prefix: Annotated[str, name_rule(table_prefix_problem)] = Field(
        default="", description="prepended to every table name (a namespace when it ends in ':', e.g. 'dev:')")
    client: HBaseClientKind = Field(
        default="thrift", description="native: puts and deletes go straight to the region servers over HBase's "
        "RPC (connectors.hbase.native), located through the masters; table admin, reads and counters still "
        "go through the gateways")
    masters: list[Annotated[str, StringConstraints(pattern=r"^[^\s:]+:[0-9]{1,5}$")]] = Field(
        default_factory=list, max_length=16,
        description="client = native: the masters' RPC addresses (host:port, port 16000 by default), asked in "
        "turn where hbase:meta is; empty with no zookeeper_quorum: <host>:16000")
    zookeeper_quorum: list[Annotated[str, StringConstraints(pattern=r"^[^\s:]+(:[0-9]{1,5})?$")]] = Field(
        default_factory=list, max_length=16,
        description="client = native: hbase.zookeeper.quorum (host or host:port, 2181 by default), read when no "
        "master answers")
    zookeeper_parent: str = Field(default="/hbase", pattern=r"^/\S*$", description="zookeeper.znode.parent")
    rpc_tls: bool = Field(
        default=False, description="client = native: TLS to the masters and region servers (their "
        "hbase.server.netty.tls.enabled), checked against tls_ca_file (None: the system's CAs) and, with "
        "tls_check_hostname, the host connected to; tls_cert_file/tls_key_file when they ask for a client certificate")

    @model_validator(mode="after")
    def _one_way_to_name_gateways(self) -> HBaseSettings:
        single = sorted({"host", "port", "thrift2_port"} & self.model_fields_set)
        if self.gateways and single:
            raise ValueError(f"give either gateways or {'/'.join(single)}, not both (a single gateway is "
                             "gateways = [{host = ..., port = ..., thrift2_port = ...}])")
        seen: dict[tuple[str, int], int] = {}
        for i, g in enumerate(self.gateways):
            if (g.auth or self.auth) == "kerberos" and (g.transport or self.transport) == "framed":
                raise ValueError(f"gateways[{i}]: auth = \"kerberos\" over a socket is SASL, which frames messages "
                                 "itself: use transport = \"buffered\" (or \"http\" for SPNEGO)")
            for addr in ((g.host, g.port), (g.host, g.thrift2_port)):
                if addr in seen:
                    raise ValueError(f"gateways[{i}] ({g.host}:{g.port}, thrift2 {g.thrift2_port}) uses "
                                     f"{addr[0]}:{addr[1]}, as gateways[{seen[addr]}] does: each gateway needs "
                                     "its own ports")
                seen[addr] = i
        return self

    @model_validator(mode="after")
    def _security_fits(self) -> HBaseSettings:
        if self.auth == "kerberos" and self.transport == "framed" and not self.gateways:
            raise ValueError('auth = "kerberos" over a socket is SASL, which frames messages itself: use '
                             'transport = "buffered" (or "http" for SPNEGO)')
        if self.kerberos_keytab is not None and not self.kerberos_principal:
            raise ValueError("kerberos_keytab without kerberos_principal: name the principal whose keys it holds")
        if self.tls_key_file is not None and self.tls_cert_file is None:
            raise ValueError("tls_key_file without tls_cert_file: a client certificate needs both")
        if self.rpc_tls and self.client != "native":
            raise ValueError('rpc_tls is TLS on HBase\'s own RPC, which only client = "native" speaks; TLS to the '
                             "Thrift gateways is tls")
        if self.client == "native" and self.auth != "kerberos" and any(g.auth == "kerberos" for g in self.gateways):
            raise ValueError('client = "native" logs in to the masters and region servers as [hbase] auth says, and '
                             'it is "none" while a gateway uses Kerberos (so the cluster requires it): set auth = '
                             '"kerberos" in [hbase] (a gateway without Kerberos then says auth = "none" itself)')
        return self

    def master_addresses(self) -> list[str]:
        """``masters``; when neither it nor ``zookeeper_quorum`` is given, ``<host>:16000`` (the master's
        default RPC port beside the one gateway)."""
        return list(self.masters) or ([] if self.zookeeper_quorum else [f"{self.host}:16000"])

    def endpoints(self) -> list[GatewaySpec]:
        """The gateways in order: ``gateways``, or the one of ``host``/``port``/``thrift2_port``."""
        return list(self.gateways) or [GatewaySpec(host=self.host, port=self.port, thrift2_port=self.thrift2_port)]


#: what one open batch groups: the rows of one region server, or of one region (pipeline.core.ingest.batcher)
BatchBy = Literal["server", "region"]


class WriterSettings(Section):
    """Batching (per region server or per region), concurrency, retries and the memory bound of the
    ingest worker."""

    max_batch_rows: int = Field(default=1000, ge=1, le=1_000_000)
    max_batch_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=2**30)
    max_batch_age_ms: int = Field(default=200, ge=1, le=MAX_MS)
    seal_when_caught_up: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="once the worker has routed every record Kafka delivered, seal the open batches at once "
                    "instead of holding them up to max_batch_age_ms. auto: when the broker batches fetches "
                    "([kafka] fetch_min_bytes > 1) for at least max_batch_age_ms (fetch_max_wait_ms), as by "
                    "default: more rows would come only with the next fetch, after the age rule sealed the "
                    "batch anyway, so holding it adds latency and no rows")
    batch_by: BatchBy = Field(
        default="server",
        description="what one open batch holds: the rows of one region server (batches stay large however "
                    "many regions a table has) or of one region (pipeline.core.ingest.batcher)")
    concurrency: int = Field(default=8, ge=1, le=1024, description="batches written at once")
    max_in_flight_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024, le=2**40,
        description="memory of mutations read but not yet acknowledged (Python object cost included); "
                    "fetching pauses at this bound and resumes below half of it")
    retry_initial_ms: int = Field(default=100, ge=1, le=MAX_MS)
    retry_max_ms: int = Field(default=10_000, ge=1, le=MAX_MS)
    retry_deadline_s: float | None = Field(default=None, ge=0, description="None = retry forever")
    commit_interval_ms: int = Field(default=1000, ge=10, le=MAX_MS)
    shutdown_timeout_s: float = Field(default=30.0, gt=0, le=MAX_S)
    max_key_bytes: int = Field(default=32767, ge=1, le=32767)
    max_cell_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=INT32_MAX)
    ack_ledger_dir: Path | None = Field(
        default=None,
        description="diagnostics: append a JSON line per batch HBase acknowledged (gateway, region, server, "
                    "rows with their offsets) to <dir>/acks-<pid>.jsonl; see pipeline.runtime.ingest.ledger")


class RuntimeSettings(Section):
    """Process-wide tuning applied by the long-running commands (run, backfill, scan, demo)."""

    gc_threshold0: int = Field(
        default=50_000, ge=0, le=10_000_000,
        description="CPython generation-0 GC threshold, with the start-up heap frozen (0 = Python's defaults); "
                    "see pipeline.runtime.process.gctune")
    cpu_affinity: list[Annotated[int, Field(ge=0, le=MAX_CPU)]] = Field(
        default_factory=list,
        description="CPUs the process may run on (empty = any); one CPU suits a process bound by its own "
                    "CPU, such as a big scan: see pipeline.runtime.process.affinity")
    fail_fast: bool = Field(
        default=False,
        description="stop at start-up when Kafka or HBase is unreachable instead of waiting and retrying "
                    "with backoff (for supervisors that restart the process themselves)")


class MetricsSettings(Section):
    enabled: bool = False
    host: str = Field(default="127.0.0.1", min_length=1,
                      description="address the metrics server binds: 127.0.0.1 (this machine only) unless "
                                  "told otherwise, e.g. 0.0.0.0 (every interface)")
    port: int = Field(default=9108, ge=0, le=MAX_PORT, description="0 = any free port")
    skew_window_s: float = Field(default=60.0, gt=0, le=MAX_S)


class LoggingSettings(Section):
    """How run, backfill and demo log on stderr (``--log-format`` overrides it): ``text``, key=value
    lines, or ``json``, one object per line for log shippers (see :mod:`pipeline.cli.logsetup`)."""

    format: Literal["text", "json"] = "text"


class Settings(BaseSettings):
    """The whole configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    kafka: KafkaSettings = KafkaSettings()
    hbase: HBaseSettings = HBaseSettings()
    writer: WriterSettings = WriterSettings()
    runtime: RuntimeSettings = RuntimeSettings()
    metrics: MetricsSettings = MetricsSettings()
    logging: LoggingSettings = LoggingSettings()
    #: the ``[stack]`` table, read by the local stack's commands (``devstack.settings`` validates it: the
    #: worker does not read it); its keys and ``HBASE_INGEST_STACK__*`` variables are taken as given here
    stack: dict[str, Any] = Field(default_factory=dict)
    registry: RegistrySettings = RegistrySettings()
    topics: list[TopicSpec] = Field(default_factory=list)
    tables: list[TableSpec] = Field(default_factory=list)
    routes: list[RouteSpec] = Field(default_factory=list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment variables win over the TOML file (passed as init values); the source reads the
        # variables against settings_cls, so pipeline.settings_env needs no import of this module
        return (EnvironmentSource(settings_cls), init_settings)

    @model_validator(mode="after")
    def _cross_check(self) -> Settings:
        problems: list[str] = []
        for what, names in (("route", [r.name for r in self.routes]), ("table", [t.name for t in self.tables]),
                            ("topic", [t.name for t in self.topics])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                problems.append(f"{what} names must be unique; repeated: {', '.join(dupes)}")
        framed = [f"topic {t.name!r} ({part}_format {fmt!r})" for t in self.topics
                  for part, fmt in (("value", t.value_format), ("key", t.key_format)) if fmt in REGISTRY_FORMATS]
        if framed and self.registry.url is None:
            problems.append(f"{', '.join(framed)} reads writer schemas from a schema registry: set [registry] url "
                            "(e.g. http://127.0.0.1:8085/apis/ccompat/v7, what `stack up --registry` serves)")
        dead = self.kafka.dead_letter_topic
        loops = [r.name for r in self.routes if r.topic == dead]
        if loops:
            problems.append(f"kafka.dead_letter_topic {dead!r} is also the topic of route(s) {', '.join(loops)}: "
                            f"events that fail would be read again; choose another dead-letter topic")
        prefix = self.hbase.table_prefix
        if prefix:
            named = dict.fromkeys([*(t.name for t in self.tables), *(r.table for r in self.routes)])
            for table in named:
                problem = table_name_problem(prefix + table)
                if problem is not None:
                    problems.append(f"table {table!r} with hbase.table_prefix {prefix!r} is {prefix + table!r} "
                                    f"in HBase: {problem}")
        tables = {t.name: t for t in self.tables}
        for route in self.routes:
            spec = tables.get(route.table)
            if spec is None:
                continue  # the table may exist already; the worker checks it against HBase at start
            for family in route.families:
                if family not in spec.families:
                    problems.append(
                        f"route {route.name!r} writes family {family!r}, which table {route.table!r} "
                        f"does not declare (declared: {', '.join(sorted(spec.families))})")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def route(self, name: str) -> RouteSpec:
        for route in self.routes:
            if route.name == name:
                return route
        raise ConfigError(f"no route named {name!r}; routes: {', '.join(r.name for r in self.routes) or 'none'}")

    def topic(self, name: str) -> TopicSpec:
        """How topic ``name``'s records are decoded: its ``[[topics]]`` entry, else JSON with text keys."""
        for topic in self.topics:
            if topic.name == name:
                return topic
        return TopicSpec(name=name)

    def table(self, name: str) -> TableSpec:
        """The declared table ``name``, else one with the default families (``ConfigError`` for a name
        HBase would refuse)."""
        for table in self.tables:
            if table.name == name:
                return table
        problem = table_name_problem(name)
        if problem is not None:
            raise ConfigError(f"table {name!r}: {problem}")
        return TableSpec(name=name)


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load ``path`` (a TOML profile; None = embedded defaults), apply environment overrides.

    Raises :class:`ConfigError` naming every bad key or variable, what was expected and what was given.
    """
    return load_settings_as(Settings, path, **overrides)


def load_settings_as(settings_cls: type[S], path: str | Path | None = None, **overrides: Any) -> S:
    """:func:`load_settings` for a subclass of :class:`Settings` that types a section the worker leaves
    open (``devstack.settings`` types ``[stack]``): the same file, variables and error messages."""
    data: dict[str, Any] = {} if path is None else read_toml(Path(path))
    data.update(overrides)
    origins = read_environment(os.environ, settings_cls).origins
    try:
        return settings_cls(**data)
    except ValidationError as exc:
        where = f" in {path}" if path is not None else ""
        lines = "\n  ".join(describe_error(e, origins, data, settings_cls) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where}:\n  {lines}") from exc
