"""The schema registry adapter (Confluent's REST API, or a compatible one): writer schemas by id."""

from connectors.registry.client import RegistryClient, open_registry

__all__ = ["RegistryClient", "open_registry"]
