"""Writes records to `topic` with Confluent's AvroSerializer (the schema in `schema_file`,
registered under the topic's value subject), one per JSON line on stdin:
{"key": "...", "value": {...}} for an Avro value, {"key": "...", "raw": "text"} for bytes written
as they are (a record no Avro reader can read). In a value, {"timestamp_ms": N} is a timestamp and
{"decimal": "1.50"} a decimal, as avro_consume.py prints them. Prints the schema id it used."""

import datetime
import decimal
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def typed(v):
    if isinstance(v, dict) and set(v) == {"timestamp_ms"}:
        return datetime.datetime.fromtimestamp(v["timestamp_ms"] / 1000, tz=datetime.timezone.utc)
    if isinstance(v, dict) and set(v) == {"decimal"}:
        return decimal.Decimal(v["decimal"])
    if isinstance(v, dict):
        return {k: typed(x) for k, x in v.items()}
    return v


def main():
    bootstrap, topic, registry, schema_file = sys.argv[1:5]
    client = SchemaRegistryClient({"url": registry})
    with open(schema_file, encoding="utf-8") as f:
        serializer = AvroSerializer(client, f.read())
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    context = SerializationContext(topic, MessageField.VALUE)
    for line in sys.stdin:
        record = json.loads(line)
        if "raw" in record:
            value = record["raw"].encode()
        else:
            value = serializer(typed(record["value"]), context)
        producer.produce(topic, key=record["key"].encode(), value=value)
    if producer.flush(60) != 0:
        sys.exit("records left unsent after 60 s")
    print(client.get_latest_version(f"{topic}-value").schema_id, flush=True)


if __name__ == "__main__":
    main()
