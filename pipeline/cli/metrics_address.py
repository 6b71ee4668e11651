"""Where the metrics server of ``run`` and ``backfill`` listens: ``--metrics-host`` and
``--metrics-port`` over the ``[metrics]`` settings.

The default address is ``127.0.0.1`` (``[metrics].host``): ``/metrics``, ``/healthz`` and
``/readyz`` are reachable from this machine only until an operator names another address (a pod's
``0.0.0.0`` for a Prometheus that scrapes it over the network).
"""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.settings import Settings

__all__ = ["METRICS_HOST_HELP", "METRICS_PORT_HELP", "with_metrics_address"]

METRICS_HOST_HELP = ("address the metrics server binds (default: [metrics].host, 127.0.0.1: this machine only; "
                     "0.0.0.0: every interface)")
METRICS_PORT_HELP = "metrics port (default: [metrics].port, 9108; 0: any free port)"


def with_metrics_address(settings: Settings, host: str | None, port: int | None) -> Settings:
    """``settings`` with ``host`` and ``port`` (the options' values) in ``[metrics]``; None keeps the
    setting. An empty or blank host is a :class:`ConfigError` naming ``--metrics-host`` (the
    port's range is checked by the option itself)."""
    update: dict[str, str | int] = {}
    if host is not None:
        if not host.strip():
            raise ConfigError("--metrics-host must not be empty (127.0.0.1: this machine only; "
                              "0.0.0.0: every interface)")
        update["host"] = host.strip()
    if port is not None:
        update["port"] = port
    if not update:
        return settings
    return settings.model_copy(update={"metrics": settings.metrics.model_copy(update=update)})
