"""Re-driving dead letters into the route that refused them: the settings of a backfill of the
dead-letter topic (``hbase-ingest backfill -t <dead-letter topic> --route NAME``).

The route's records went to ``[kafka].dead_letter_topic`` with their original key, value and
headers and ours (:mod:`pipeline.core.records.deadletters`). A re-drive reads that topic as the route's own
topic, in the route's topic's formats, and routes each dead letter that names the route (or, refused
as a whole, came from the route's topic) as the record it was; any other dead letter is skipped
(:mod:`pipeline.core.routes.reference`). Typical use: fix the route (a rowkey that takes the values it
refused, ``null_key = "skip"``...), then re-drive its dead letters. A dead letter refused again goes
back to the dead-letter topic, past the end of the re-driven slice, with its first source.
"""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.settings import Settings

__all__ = ["redrive_settings"]


def redrive_settings(settings: Settings, route: str, topic: str) -> Settings:
    """``settings`` for re-driving the dead letters in ``topic`` into ``route`` (module docstring):
    that route alone, reading ``topic``. Raises :class:`ConfigError` when the route is unknown or
    ``topic`` is not the profile's dead-letter topic."""
    spec = settings.route(route)
    dead = settings.kafka.dead_letter_topic
    if topic != dead:
        raise ConfigError(f"--route re-drives dead letters: the topic must be [kafka].dead_letter_topic ({dead!r}), "
                          f"got {topic!r}")
    source = settings.topic(spec.topic)
    redrive = source.model_copy(update={"name": dead, "redrive_of": spec.topic})
    return settings.model_copy(update={"routes": [spec.model_copy(update={"topic": dead})], "topics": [redrive]})
