"""An independent consumer of the gateway's framed records: Confluent's own
Python client (confluent-kafka from PyPI) reads a topic, and its
registry-aware JSONDeserializer, given no schema of its own, finds each
record's writer schema in the registry by the id in the frame.

    consume.py BROKERS REGISTRY_URL TOPIC MESSAGE_ID

Prints one JSON object: the deserialized event, the schema id from the
frame, the schema the registry returned for it and the subjects that hold
it. Exits 1 when no record of TOPIC carries MESSAGE_ID as `event-id`.
"""

import json
import struct
import sys

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def main(brokers, registry_url, topic, message_id):
    # A timeout on every registry call: without one (the client's default)
    # a request the registry never answers hangs the test for ever.
    registry = SchemaRegistryClient({"url": registry_url, "timeout": 20})
    # The writer schema comes from the id in the frame; the subject is the
    # topic's. confluent-kafka 2.16's default strategy (ASSOCIATED) asks
    # the registry's associations API first, which Apicurio's ccompat API
    # does not have (and one such request hung CI for 20 minutes).
    deserializer = JSONDeserializer(None, schema_registry_client=registry,
                                    conf={"subject.name.strategy.type": "TOPIC"})
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": "eventgw-registry-proof",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    remaining = set(partitions)
    try:
        while remaining:
            message = consumer.poll(10)
            if message is None:
                break
            if message.error():
                remaining.discard(message.partition())
                continue
            headers = {k: (v or b"").decode() for k, v in (message.headers() or [])}
            if headers.get("event-id") != message_id:
                continue
            value = message.value()
            magic, schema_id = struct.unpack(">bI", value[:5])
            event = deserializer(value, SerializationContext(topic, MessageField.VALUE, message.headers()))
            schema = registry.get_schema(schema_id)
            print(json.dumps({
                "magic": magic,
                "schema_id": schema_id,
                "event": event,
                "schema_type": schema.schema_type,
                "schema": json.loads(schema.schema_str),
                "subjects": registry.get_subjects_by_schema_id(schema_id),
                "headers": headers,
            }))
            return 0
    finally:
        consumer.close()
    print(f"no record with event-id {message_id} on {topic}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
