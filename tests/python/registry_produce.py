"""Writes records to `topic` with Confluent's AvroSerializer or JSONSerializer (`format`: avro or
json; the schema in `schema_file`, registered under the topic's value subject), one per JSON line
on stdin: {"key": "...", "value": {...}} for a typed value, {"key": "...", "raw": "text"} for
bytes written as they are (a record no registry reader can read). In an Avro value,
{"timestamp_ms": N} is a timestamp and {"decimal": "1.50"} a decimal, as registry_consume.py
prints them (a JSON value is written as given). Prints the schema id it used."""

import datetime
import decimal
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
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
    form = sys.argv[5] if len(sys.argv) > 5 else "avro"
    client = SchemaRegistryClient({"url": registry})
    with open(schema_file, encoding="utf-8") as f:
        text = f.read()
    serializer = AvroSerializer(client, text) if form == "avro" else JSONSerializer(text, client)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    context = SerializationContext(topic, MessageField.VALUE)
    for line in sys.stdin:
        record = json.loads(line)
        if "raw" in record:
            value = record["raw"].encode()
        else:
            value = serializer(typed(record["value"]) if form == "avro" else record["value"], context)
        producer.produce(topic, key=record["key"].encode(), value=value)
    if producer.flush(60) != 0:
        sys.exit("records left unsent after 60 s")
    print(client.get_latest_version(f"{topic}-value").schema_id, flush=True)


if __name__ == "__main__":
    main()
