"""Reads `count` records of `topic` with Confluent's AvroDeserializer or JSONDeserializer
(`format`: avro or json; schemas fetched from the registry by the id each record carries) and
prints each as one JSON line:
{"key": ..., "value": {...}, "schema_id": N}. Exits 1 if fewer arrive within `timeout` seconds."""

import datetime
import decimal
import json
import sys
import time

from confluent_kafka import DeserializingConsumer, KafkaError
from confluent_kafka.error import ConsumeError
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import StringDeserializer


def plain(v):
    if isinstance(v, datetime.datetime):
        return {"timestamp_ms": int(v.timestamp() * 1000)}
    if isinstance(v, datetime.date):
        return {"date": v.isoformat()}
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    raise TypeError(f"cannot show {type(v)}")


def main():
    bootstrap, topic, registry, count, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    form = sys.argv[6] if len(sys.argv) > 6 else "avro"
    client = SchemaRegistryClient({"url": registry})
    # The JSON deserializer validates each value against its writer's schema.
    deserializer = AvroDeserializer(client) if form == "avro" else JSONDeserializer(None, schema_registry_client=client)
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"avro-check-{time.time_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # The topic appears when the connector first produces: see it within half a second.
        "topic.metadata.refresh.interval.ms": 500,
        "key.deserializer": StringDeserializer("utf_8"),
        "value.deserializer": deserializer,
    })
    consumer.subscribe([topic])
    seen = 0
    deadline = time.time() + timeout
    while seen < count and time.time() < deadline:
        try:
            msg = consumer.poll(0.5)
        except ConsumeError as e:
            # The topic appears when the connector first produces to it.
            if e.code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise
        if msg is None:
            continue
        if msg.error():
            print(json.dumps({"error": str(msg.error())}), flush=True)
            continue
        raw = msg.value()
        print(json.dumps({"key": msg.key(), "value": raw, "partition": msg.partition()}, default=plain), flush=True)
        seen += 1
    consumer.close()
    sys.exit(0 if seen >= count else 1)


if __name__ == "__main__":
    main()
