"""The Kafka adapter: aiokafka behind the ports of :mod:`pipeline.ports`.

- :class:`KafkaBroker` (:class:`~pipeline.ports.Broker`): the composition root builds one from
  :class:`~pipeline.settings.KafkaSettings` and hands it to runtime;
- :class:`KafkaSource` / :class:`KafkaSink`: a consumer and a producer, in the project's types;
- :mod:`connectors.kafka.errors`: aiokafka's errors translated at this edge;
- :mod:`connectors.kafka.admin`: the raw clients and one-shot topic/offset calls (for the adapters,
  and for tests that look at Kafka directly).
"""

from .admin import (
    TopicPartition,
    common_options,
    create_topics,
    delete_topics,
    end_offsets,
    ensure_topic,
    make_admin,
    make_consumer,
    make_producer,
    partitions,
    start_offsets,
)
from .broker import KafkaBroker
from .errors import map_errors, translate
from .sink import KafkaSink
from .source import KafkaSource

__all__ = [
    "KafkaBroker",
    "KafkaSink",
    "KafkaSource",
    "TopicPartition",
    "common_options",
    "create_topics",
    "delete_topics",
    "end_offsets",
    "ensure_topic",
    "make_admin",
    "make_consumer",
    "make_producer",
    "map_errors",
    "partitions",
    "start_offsets",
    "translate",
]
