"""A schema registry client over Confluent's REST API (httpx; async, one connection pool).

What it asks (paths under ``[registry] url``):

- ``GET /schemas/ids/{id}?format=serialized``: one schema by id (``format=serialized`` makes a
  Protobuf schema come back as a base64 ``FileDescriptorProto``; other types ignore it). Its
  ``references`` are resolved through ``GET /subjects/{subject}/versions/{version}``, recursively, each
  once, dependencies first.
- ``GET /subjects``: the start-up reachability check.

A Protobuf schema that comes back as ``.proto`` source is compiled to descriptors here
(:mod:`connectors.registry.protosource`).

Errors (:mod:`pipeline.errors`), each naming the registry and what was asked, never the password:
a 404 for a schema id -> :class:`~pipeline.errors.SchemaNotFound`; no answer (refused, reset, DNS,
timeout after ``timeout_s``) or a 5xx/429 answer -> :class:`~pipeline.errors.RegistryUnavailable`
(retry with backoff); any other answer (401/403: credentials; 4xx) or a body that is not a schema
-> :class:`~pipeline.errors.RegistryError`.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

import httpx

from connectors.registry.protosource import is_serialized, serialized
from pipeline.core.records.schemas import DEFAULT_SCHEMA_TYPE, RegisteredSchema, SchemaReference, SchemaType
from pipeline.errors import ConfigError, RegistryError, RegistryUnavailable, SchemaNotFound
from pipeline.settings import REGISTRY_FORMATS, RegistrySettings, Settings

__all__ = ["RegistryClient", "open_registry", "registry_password"]

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
_TYPES: tuple[SchemaType, ...] = ("AVRO", "JSON", "PROTOBUF")
#: a reference chain longer than this is a cycle or a registry fault
_MAX_REFERENCES = 256


def registry_password(s: RegistrySettings) -> str | None:
    """The registry password: ``password``, else the first line of ``password_file``."""
    if s.password is not None:
        return s.password.get_secret_value()
    if s.password_file is None:
        return None
    try:
        lines = Path(s.password_file).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"[registry] password_file {str(s.password_file)!r} cannot be read: {exc.strerror}") from None
    if not lines or not lines[0].strip():
        raise ConfigError(f"[registry] password_file {str(s.password_file)!r} is empty")
    return lines[0].strip()


def _tls(s: RegistrySettings) -> ssl.SSLContext | bool:
    if s.ca_file is None and s.cert_file is None:
        return True  # the system's CAs (an https URL); unused for http
    try:
        ctx = ssl.create_default_context(cafile=str(s.ca_file) if s.ca_file is not None else None)
        if s.cert_file is not None:
            ctx.load_cert_chain(str(s.cert_file), str(s.key_file) if s.key_file is not None else None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"[registry] TLS files (ca_file {str(s.ca_file)!r}, cert_file {str(s.cert_file)!r}) "
                          f"could not be loaded: {exc}") from None
    return ctx


class RegistryClient:
    """One registry (``[registry]``); :meth:`aclose` when done. Satisfies
    :class:`pipeline.ports.SchemaRegistry`."""

    def __init__(self, settings: RegistrySettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if settings.url is None:
            raise ConfigError("[registry] url is not set")
        self.url = settings.url.rstrip("/")
        password = registry_password(settings)
        auth = httpx.BasicAuth(settings.username, password or "") if settings.username else None
        self._http = httpx.AsyncClient(base_url=self.url, auth=auth, verify=_tls(settings),
                                       timeout=settings.timeout_s, headers={"Accept": _ACCEPT},
                                       transport=transport, follow_redirects=False)

    def __repr__(self) -> str:
        return f"RegistryClient({self.url})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def check(self) -> None:
        """Raise unless the registry answers ``GET /subjects`` (the worker's start-up wait)."""
        await self._get("/subjects", "listing subjects")

    async def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema ``schema_id`` with its references resolved (module docstring for errors)."""
        what = f"schema id {schema_id}"
        try:
            body = await self._get(f"/schemas/ids/{schema_id}", f"fetching {what}", {"format": "serialized"})
        except SchemaNotFound as exc:
            raise SchemaNotFound(str(exc), schema_id=schema_id) from exc.__cause__
        schema_type, text, refs = self._parse(body, what)
        resolved: dict[tuple[str, int], SchemaReference] = {}
        await self._resolve(refs, resolved, what)
        references, problem = tuple(resolved.values()), None
        if schema_type == "PROTOBUF" and not is_serialized(text):
            try:  # a registry that keeps .proto source and does not serialize it (Apicurio's ccompat API)
                text, references = serialized(text, references)
            except ValueError as exc:
                problem = f".proto source that does not compile: {exc}"
        return RegisteredSchema(schema_id, schema_type, text, references, problem)

    async def register(self, subject: str, schema: str, schema_type: SchemaType = "AVRO") -> int:
        """Register ``schema`` under ``subject`` (or find it there); its id. ``RegistryError`` when the
        registry refuses it (an incompatible change: Confluent's error 409)."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != DEFAULT_SCHEMA_TYPE:
            body["schemaType"] = schema_type
        doing = f"registering a {schema_type} schema under subject {subject!r}"
        answer = await self._request("POST", f"/subjects/{quote(subject, safe='')}/versions", doing, json=body)
        try:
            return int(answer["id"])
        except (KeyError, TypeError, ValueError):
            raise RegistryError(f"registry {self.url}: {doing}: the answer holds no id ({answer!r})") from None

    async def _resolve(self, refs: list[Any], resolved: dict[tuple[str, int], SchemaReference], what: str) -> None:
        for ref in refs:
            try:
                name, subject, version = str(ref["name"]), str(ref["subject"]), int(ref["version"])
            except (KeyError, TypeError, ValueError):
                raise RegistryError(f"registry {self.url}: {what} has a malformed reference {ref!r}") from None
            if (subject, version) in resolved:
                continue
            if len(resolved) >= _MAX_REFERENCES:
                raise RegistryError(f"registry {self.url}: {what} references more than {_MAX_REFERENCES} schemas")
            about = f"reference {name!r} (subject {subject!r} version {version}) of {what}"
            try:
                body = await self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}", f"fetching {about}",
                                       {"format": "serialized"})
            except SchemaNotFound:
                raise RegistryError(f"registry {self.url}: {about} does not exist") from None
            _, text, inner = self._parse(body, about)
            await self._resolve(inner, resolved, what)  # its own dependencies first
            resolved[(subject, version)] = SchemaReference(name, text, subject, version)

    def _parse(self, body: Any, what: str) -> tuple[SchemaType, str, list[Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(f"registry {self.url}: the answer for {what} holds no schema text")
        schema_type = body.get("schemaType") or DEFAULT_SCHEMA_TYPE
        if schema_type not in _TYPES:
            raise RegistryError(f"registry {self.url}: {what} has schemaType {schema_type!r}, expected one of "
                                f"{', '.join(_TYPES)}")
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise RegistryError(f"registry {self.url}: {what} has references that are not a list")
        return schema_type, body["schema"], refs

    async def _get(self, path: str, doing: str, params: dict[str, str] | None = None) -> Any:
        return await self._request("GET", path, doing, params=params)

    async def _request(self, method: str, path: str, doing: str, *, params: dict[str, str] | None = None,
                       json: Any = None) -> Any:
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"} if json is not None else None
        try:
            response = await self._http.request(method, path, params=params, json=json, headers=headers)
        except httpx.TimeoutException as exc:
            raise RegistryUnavailable(f"registry {self.url}: {doing} timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RegistryUnavailable(f"registry {self.url}: {doing} failed: {type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status == 200:
            try:
                return response.json()
            except ValueError as exc:
                raise RegistryError(f"registry {self.url}: {doing}: the answer is not JSON") from exc
        detail = _detail(response)
        if status == 404:
            raise SchemaNotFound(f"registry {self.url}: {doing}: not found ({detail})", schema_id=-1)
        if status >= 500 or status == 429:
            raise RegistryUnavailable(f"registry {self.url}: {doing}: HTTP {status} ({detail})")
        if status in (401, 403):
            raise RegistryError(f"registry {self.url}: {doing}: HTTP {status}, the credentials were refused "
                                f"([registry] username/password) ({detail})")
        raise RegistryError(f"registry {self.url}: {doing}: HTTP {status} ({detail})")


def _detail(response: httpx.Response) -> str:
    """Confluent's error body (``error_code``, ``message``), or the start of the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or "no body"
    if isinstance(body, dict) and "message" in body:
        code = body.get("error_code")
        return f"{body['message']}" + (f", error {code}" if code is not None else "")
    return str(body)[:200]


@asynccontextmanager
async def open_registry(settings: Settings) -> AsyncIterator[RegistryClient | None]:
    """A client of ``[registry]`` while the block runs when a topic of ``settings`` is in a registry
    format, else None (the composition root's one place that decides it); closed at the end."""
    if not any(fmt in REGISTRY_FORMATS for t in settings.topics for fmt in (t.value_format, t.key_format)):
        yield None
        return
    client = RegistryClient(settings.registry)
    try:
        yield client
    finally:
        await client.aclose()
