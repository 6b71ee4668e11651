"""Prometheus metrics, the health/readiness server and its background probes.

- :mod:`.registry`: every series of one worker, in its own registry (the table of names is there);
- :mod:`.observer`: the worker observer that feeds it (:func:`attach_metrics`);
- :mod:`.server`: ``/metrics``, ``/healthz``, ``/readyz``;
- :mod:`.probes`: the HBase probe, log offsets for lag, and :func:`serve_metrics`, which runs it all.
"""

from pipeline.runtime.metrics.observer import MetricsObserver, attach_metrics, metrics_of
from pipeline.runtime.metrics.probes import serve_metrics
from pipeline.runtime.metrics.registry import Metrics
from pipeline.runtime.metrics.server import MetricsServer

__all__ = ["Metrics", "MetricsObserver", "MetricsServer", "attach_metrics", "metrics_of", "serve_metrics"]
