"""Reads `count` records of `topic` with Confluent's AvroDeserializer, JSONDeserializer or
ProtobufDeserializer (`format`: avro, json or protobuf; schemas fetched from the registry by the id
each record carries; for protobuf, key and value are both read as the converter writes them, the
message classes compiled from the subjects' latest schemas) and prints each as one JSON line:
{"key": ..., "value": {...}}. Exits 1 if fewer arrive within `timeout` seconds."""

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

PROTO_TYPES = {"google.protobuf.Timestamp", "google.type.Date", "google.type.TimeOfDay", "confluent.type.Decimal"}


def proto_plain(msg):
    """A protobuf message as JSON, Connect's types as plain() shows them."""
    from confluent_kafka.schema_registry.confluent.type import decimal_utils

    name = msg.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        return {"timestamp_ms": msg.ToMilliseconds()}
    if name == "confluent.type.Decimal":
        return {"decimal": str(decimal_utils.from_proto_decimal(msg))}
    if name == "google.type.Date":
        return {"date": f"{msg.year:04}-{msg.month:02}-{msg.day:02}"}
    if name == "google.type.TimeOfDay":
        return {"time": f"{msg.hours:02}:{msg.minutes:02}:{msg.seconds:02}"}
    if name.startswith("google.protobuf.") and name.endswith("Value"):
        return msg.value
    out = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.message_type is not None and not field.is_repeated and not msg.HasField(field.name):
            out[field.name] = None
        elif field.message_type is not None and not field.is_repeated:
            out[field.name] = proto_plain(value)
        elif field.is_repeated:
            out[field.name] = [proto_plain(v) if hasattr(v, "DESCRIPTOR") else v for v in value]
        else:
            out[field.name] = value
    return out


def protobuf_deserializers(client, topic, timeout):
    """Key and value ProtobufDeserializers for `topic`, their classes compiled from the registry's
    latest schemas (waiting for the connector to register them)."""
    import proto_schemas
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    deadline = time.time() + timeout
    while True:
        try:
            key = client.get_latest_version(f"{topic}-key").schema.schema_str
            value = client.get_latest_version(f"{topic}-value").schema.schema_str
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.5)
    key_class = proto_schemas.message_class(key, "StringValue")
    value_class = proto_schemas.message_class(value)
    conf = {"use.deprecated.format": False}
    # A string key is google.protobuf.StringValue, registered as wrappers.proto (as Connect does):
    # Python's deserializer already holds that file and refuses to load it twice from the registry
    # ("duplicate symbol"), so the key is read without the registry (framing, message indexes and
    # message still checked); the value with it.
    return ProtobufDeserializer(key_class, conf, None), ProtobufDeserializer(value_class, conf, client)


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
    if form == "protobuf":
        import proto_schemas

        client = proto_schemas.DescriptorRegistry({"url": registry})
        key_deserializer, deserializer = protobuf_deserializers(client, topic, timeout)
    else:
        client = SchemaRegistryClient({"url": registry})
        key_deserializer = StringDeserializer("utf_8")
        # The JSON deserializer validates each value against its writer's schema.
        deserializer = AvroDeserializer(client) if form == "avro" else JSONDeserializer(None, schema_registry_client=client)
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"avro-check-{time.time_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # The topic appears when the connector first produces: see it within half a second.
        "topic.metadata.refresh.interval.ms": 500,
        "key.deserializer": key_deserializer,
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
        raw, key = msg.value(), msg.key()
        if form == "protobuf":
            raw, key = proto_plain(raw) if raw is not None else None, proto_plain(key)
        print(json.dumps({"key": key, "value": raw, "partition": msg.partition()}, default=plain), flush=True)
        seen += 1
    consumer.close()
    sys.exit(0 if seen >= count else 1)


if __name__ == "__main__":
    main()
