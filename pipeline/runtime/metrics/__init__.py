"""Prometheus metrics, the health/readiness server and its background probes."""
