"""Process-level tuning: CPU affinity and garbage-collector thresholds."""
