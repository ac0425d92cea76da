"""Protobuf message classes from `.proto` text, for the Protobuf checks of registry_consume.py and
registry_produce.py: the text is compiled by protoc (grpcio-tools), its imports of Google's and
Confluent's well-known files served from the descriptors Python's packages carry.

`DescriptorRegistry` is Confluent's Python registry client that also serves a schema the registry
holds as `.proto` text in the form `?format=serialized` asks for (a base64 FileDescriptorProto).
Confluent's Schema Registry converts on that request; Apicurio 3.0.9, which the tests run,
ignores the parameter and answers the text, which Python's ProtobufDeserializer cannot read. The
client does the registry's conversion, nothing else."""

import base64
import os
import tempfile

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2, wrappers_pb2
from google.protobuf.message_factory import GetMessageClass
from google.type import date_pb2, timeofday_pb2
from grpc_tools import protoc

DEPENDENCIES = [descriptor_pb2, timestamp_pb2, wrappers_pb2, date_pb2, timeofday_pb2, meta_pb2, decimal_pb2]


def _dependency_set():
    deps = descriptor_pb2.FileDescriptorSet()
    for module in DEPENDENCIES:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        deps.file.append(proto)
    return deps


def compile_text(text):
    """The FileDescriptorProto of `.proto` text, compiled by protoc."""
    with tempfile.TemporaryDirectory() as d:
        deps, source, out = (os.path.join(d, n) for n in ("deps.pb", "schema.proto", "out.pb"))
        with open(deps, "wb") as f:
            f.write(_dependency_set().SerializeToString())
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        code = protoc.main(["protoc", f"--descriptor_set_in={deps}", f"-I{d}", f"--descriptor_set_out={out}", "schema.proto"])
        if code != 0:
            raise ValueError(f"protoc could not compile the schema (exit {code}):\n{text}")
        with open(out, "rb") as f:
            compiled = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return compiled.file[0]


def message_class(text, name=None):
    """The class of the message called `name` (default: the file's first) in `.proto` text."""
    file = compile_text(text)
    pool = descriptor_pool.DescriptorPool()
    for dep in _dependency_set().file:
        pool.Add(dep)
    if file.package == "google.protobuf":
        return GetMessageClass(wrappers_pb2.DESCRIPTOR.message_types_by_name[name or file.message_type[0].name])
    pool.Add(file)
    full = name or file.message_type[0].name
    if file.package:
        full = f"{file.package}.{full}"
    return GetMessageClass(pool.FindMessageTypeByName(full))


class DescriptorRegistry(SchemaRegistryClient):
    """Serves `.proto` text as a base64 descriptor when `format=serialized` asks for one."""

    def get_schema(self, schema_id, subject_name=None, fmt=None, reference_format=None):
        schema = super().get_schema(schema_id, subject_name, fmt, reference_format)
        text = schema.schema_str or ""
        if fmt != "serialized" or schema.schema_type != "PROTOBUF" or "syntax" not in text:
            return schema
        serialized = base64.standard_b64encode(compile_text(text).SerializeToString()).decode("ascii")
        return Schema(serialized, "PROTOBUF", schema.references)
