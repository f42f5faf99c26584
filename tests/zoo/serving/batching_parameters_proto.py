"""TensorFlow Serving's `BatchingParameters` message, for reading `batching_parameters.txt`
as the model server reads it.

The message lives in `tensorflow_serving/servables/tensorflow/session_bundle_config.proto`,
which the `tensorflow-serving-api` wheel does not ship (it holds the client's protos only).
Where the server's module is importable it is used; otherwise the message is declared here
with the server's field names, numbers and types (as of TF Serving 2.x, large-batch splitting
included), so that protobuf's text parser refuses a field the server does not know.
"""

from __future__ import annotations

from typing import Any

# (name, number, wrapper type or a scalar type, repeated) as the server's proto declares them.
FIELDS = [
    ("max_batch_size", 1, "Int64Value", False),
    ("batch_timeout_micros", 2, "Int64Value", False),
    ("max_enqueued_batches", 3, "Int64Value", False),
    ("num_batch_threads", 4, "Int64Value", False),
    ("thread_pool_name", 5, "StringValue", False),
    ("allowed_batch_sizes", 6, "int64", True),
    ("pad_variable_length_inputs", 7, "bool", False),
    ("enable_large_batch_splitting", 8, "BoolValue", False),
    ("max_execution_batch_size", 9, "Int64Value", False),
]


def batching_parameters_class() -> Any:
    """The `tensorflow.serving.BatchingParameters` message class."""
    try:
        from tensorflow_serving.servables.tensorflow import session_bundle_config_pb2
        return session_bundle_config_pb2.BatchingParameters
    except ImportError:
        pass
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="zoo_tests/session_bundle_config.proto", package="tensorflow.serving",
        syntax="proto3", dependency=["google/protobuf/wrappers.proto"])
    message = file.message_type.add(name="BatchingParameters")
    field_type = descriptor_pb2.FieldDescriptorProto
    for name, number, kind, repeated in FIELDS:
        field = message.field.add(name=name, number=number, label=(
            field_type.LABEL_REPEATED if repeated else field_type.LABEL_OPTIONAL))
        if kind == "int64":
            field.type = field_type.TYPE_INT64
        elif kind == "bool":
            field.type = field_type.TYPE_BOOL
        else:
            field.type = field_type.TYPE_MESSAGE
            field.type_name = f".google.protobuf.{kind}"
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))
