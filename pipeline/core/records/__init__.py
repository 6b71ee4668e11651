"""Record decoding (pure): a Kafka record's value and key as Python values, whatever the topic's format.

- ``decode``: JSON (integers beyond 64 bits kept exact; Kafka Connect envelopes unwrapped), text and
  bytes keys, and the decoder table per format.
- ``wire``, ``schemas``, ``schematypes``, ``protobufs``: the Confluent wire format and the Avro,
  Protobuf and JSON Schema bodies behind it, decoded with writer schemas the runtime fetched.
- ``deadletters``: the dead-letter topic's headers, read back (where a dead letter came from, which
  route refused it) for a re-drive.
"""
