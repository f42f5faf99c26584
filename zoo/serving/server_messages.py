"""The TensorFlow Serving messages an export writes, declared here so that exporting needs no
`tensorflow-serving-api`.

The model server reads two files of ours besides the SavedModel: the warm-up records
(`PredictionLog`s, each holding a `PredictRequest`) and `models.config` (a `ModelServerConfig`
in protobuf's text format). Their classes ship in `tensorflow-serving-api`, a client package
that pins TensorFlow and brings gRPC; but protobuf reads a binary message by its field numbers
and types, and a text one by its field names, not by the file that declared them. So the
fields we write are declared below with the server's names, numbers and types (from
`tensorflow_serving/apis/{prediction_log,predict,model}.proto` and
`tensorflow_serving/config/model_server_config.proto`), the tensors as TensorFlow's own
`TensorProto`, and protobuf encodes them. Fields we never write are left out, which changes
nothing on the wire. tests/zoo/serving/test_server_messages.py checks every field against
tensorflow-serving-api's descriptors and reads what an export wrote with its parser.

Example:
    >>> from zoo.serving.server_messages import message_class
    >>> spec = message_class("ModelSpec")(name="vit", signature_name="serving_default")
    >>> spec.SerializeToString()
    b'\\n\\x03vit\\x1a\\x0fserving_default'
"""

from __future__ import annotations

from typing import Any

# The package our declarations live in: not the server's `tensorflow.serving`, so that they
# never collide with tensorflow-serving-api's classes in one process (a full name appears in
# neither the binary nor the text format of these messages).
PACKAGE = "zoo.serving"
TENSOR = ".tensorflow.TensorProto"
TENSOR_FILE = "tensorflow/core/framework/tensor.proto"

# message -> [(field, number, type)]: a type is "string", another message of this list, or
# "map<string, TensorProto>"; a name ending in "[]" is a repeated field. (`predict_log` is a
# member of the server's `log_type` oneof, which the wire format does not mark.)
MESSAGES = {
    "ModelSpec": [("name", 1, "string"), ("signature_name", 3, "string")],
    "PredictRequest": [("model_spec", 1, "ModelSpec"),
                       ("inputs", 2, "map<string, TensorProto>")],
    "PredictLog": [("request", 1, "PredictRequest")],
    "PredictionLog": [("predict_log", 6, "PredictLog")],
    "ModelConfig": [("name", 1, "string"), ("base_path", 2, "string"),
                    ("model_platform", 4, "string")],
    "ModelConfigList": [("config[]", 1, "ModelConfig")],
    "ModelServerConfig": [("model_config_list", 1, "ModelConfigList")],
}

_CLASSES: dict[str, Any] = {}


def _file_descriptor() -> Any:
    """`MESSAGES` as a `FileDescriptorProto` that imports TensorFlow's tensor.proto."""
    from google.protobuf import descriptor_pb2

    field_type = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="zoo/serving/server_messages.proto", package=PACKAGE, syntax="proto3",
        dependency=[TENSOR_FILE])
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind in fields:
            repeated = field_name.endswith("[]") or kind.startswith("map<")
            field = message.field.add(
                name=field_name.removesuffix("[]"), number=number,
                label=field_type.LABEL_REPEATED if repeated else field_type.LABEL_OPTIONAL)
            if kind == "string":
                field.type = field_type.TYPE_STRING
                continue
            field.type = field_type.TYPE_MESSAGE
            if kind.startswith("map<"):  # a map is a repeated nested (key, value) message
                entry = message.nested_type.add(name=field.name.capitalize() + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=field_type.TYPE_STRING,
                                label=field_type.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=field_type.TYPE_MESSAGE,
                                type_name=TENSOR, label=field_type.LABEL_OPTIONAL)
                field.type_name = f".{PACKAGE}.{name}.{entry.name}"
            else:
                field.type_name = f".{PACKAGE}.{kind}"
    return file


def message_class(name: str) -> Any:
    """The protobuf class of the server's message `name` (a key of `MESSAGES`), whose
    tensors are `tensorflow.core.framework.tensor_pb2.TensorProto`s."""
    if not _CLASSES:
        from google.protobuf import descriptor_pool, message_factory
        # Registers tensor.proto (and what it imports) in the default pool, where ours finds it.
        from tensorflow.core.framework import tensor_pb2  # noqa: F401

        pool = descriptor_pool.Default()
        try:
            pool.FindFileByName("zoo/serving/server_messages.proto")
        except KeyError:
            pool.AddSerializedFile(_file_descriptor().SerializeToString())
        for message in MESSAGES:
            _CLASSES[message] = message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{PACKAGE}.{message}"))
    return _CLASSES[name]
