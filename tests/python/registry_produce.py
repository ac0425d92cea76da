"""Writes records to `topic` with Confluent's AvroSerializer, JSONSerializer or ProtobufSerializer
(`format`: avro, json or protobuf; the schema in `schema_file` (`.proto` text for protobuf, its
first message the record's), registered under the topic's value subject), one per JSON line
on stdin: {"key": "...", "value": {...}} for a typed value, {"key": "...", "raw": "text"} for
bytes written as they are (a record no registry reader can read). In an Avro value,
{"timestamp_ms": N} is a timestamp and {"decimal": "1.50"} a decimal, as registry_consume.py
prints them (a JSON value is written as given; a protobuf value's Timestamp and Decimal fields
take them too). Prints the schema id it used."""

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


def protobuf_message(cls, value):
    """A message of `cls` from a JSON value (timestamps and decimals as typed() reads them)."""
    from confluent_kafka.schema_registry.confluent.type import decimal_utils

    msg = cls()
    for name, v in value.items():
        if v is None:
            continue
        field = msg.DESCRIPTOR.fields_by_name[name]
        if isinstance(v, dict) and set(v) == {"timestamp_ms"}:
            getattr(msg, name).FromMilliseconds(v["timestamp_ms"])
        elif isinstance(v, dict) and set(v) == {"decimal"}:
            # The compiled class is not decimal_pb2's (another pool): copied through its bytes.
            getattr(msg, name).MergeFromString(decimal_utils.to_proto_decimal(decimal.Decimal(v["decimal"])).SerializeToString())
        elif field.message_type is not None:
            getattr(msg, name).CopyFrom(protobuf_message(type(getattr(msg, name)), v))
        else:
            setattr(msg, name, v)
    return msg


def main():
    bootstrap, topic, registry, schema_file = sys.argv[1:5]
    form = sys.argv[5] if len(sys.argv) > 5 else "avro"
    client = SchemaRegistryClient({"url": registry})
    with open(schema_file, encoding="utf-8") as f:
        text = f.read()
    if form == "protobuf":
        import proto_schemas
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        cls = proto_schemas.message_class(text)
        protobuf = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        serializer = lambda value, ctx: protobuf(protobuf_message(cls, value), ctx)  # noqa: E731
    else:
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
