"""The Functions host <-> language worker messages (package `AzureFunctionsRpcMessages`), defined here from the public
protocol: the names and field numbers are the protocol's (azure-functions-language-worker-protobuf, FunctionRpc.proto
and shared/NullableTypes.proto); only the messages devhost sends or the Python worker library builds are declared.

`azure-functions-runtime` builds its responses from a `protos` namespace its caller passes in (the worker process
proxy does the same on Azure), so this module IS that namespace: `rpc.StatusResult`, `rpc.InvocationResponse`, ...
Classes are made at import from descriptors (no protoc step, no generated file), in a private descriptor pool so
they never clash with another copy of the protocol loaded in the same process.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

PACKAGE = "AzureFunctionsRpcMessages"
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES, "bool": _F.TYPE_BOOL, "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64, "sint64": _F.TYPE_SINT64, "double": _F.TYPE_DOUBLE,
}
_WELL_KNOWN = {"Duration": ".google.protobuf.Duration", "Timestamp": ".google.protobuf.Timestamp"}

# Enums nested in messages: message -> {enum: [(value name, number)]}
_ENUMS: dict[str, dict[str, list[tuple[str, int]]]] = {
    "StatusResult": {"Status": [("Failure", 0), ("Success", 1), ("Cancelled", 2)]},
    "BindingInfo": {"Direction": [("in", 0), ("out", 1), ("inout", 2)],
                    "DataType": [("undefined", 0), ("string", 1), ("binary", 2), ("stream", 3)]},
    "RpcLog": {"Level": [("Trace", 0), ("Debug", 1), ("Information", 2), ("Warning", 3), ("Error", 4),
                         ("Critical", 5), ("None", 6)],
               "RpcLogCategory": [("User", 0), ("System", 1), ("CustomMetric", 2)]},
    "RpcHttpCookie": {"SameSite": [("None", 0), ("Lax", 1), ("Strict", 2), ("ExplicitNone", 3)]},
    "RpcRetryOptions": {"RetryStrategy": [("exponential_backoff", 0), ("fixed_delay", 1)]},
}

# message -> fields: (name, number, type[, "repeated" | "map:<key type>" | "oneof:<name>"])
_MESSAGES: dict[str, list[tuple[str, ...] | tuple[str, int, str] | tuple[str, int, str, str]]] = {
    "StreamingMessage": [
        ("request_id", 1, "string"),
        ("rpc_log", 2, "RpcLog", "oneof:content"),
        ("invocation_request", 4, "InvocationRequest", "oneof:content"),
        ("invocation_response", 5, "InvocationResponse", "oneof:content"),
        ("function_load_request", 8, "FunctionLoadRequest", "oneof:content"),
        ("function_load_response", 9, "FunctionLoadResponse", "oneof:content"),
        ("worker_terminate", 14, "WorkerTerminate", "oneof:content"),
        ("worker_init_response", 16, "WorkerInitResponse", "oneof:content"),
        ("worker_init_request", 17, "WorkerInitRequest", "oneof:content"),
        ("start_stream", 20, "StartStream", "oneof:content"),
        ("invocation_cancel", 21, "InvocationCancel", "oneof:content"),
        ("functions_metadata_request", 29, "FunctionsMetadataRequest", "oneof:content"),
        ("function_metadata_response", 30, "FunctionMetadataResponse", "oneof:content"),
    ],
    "StartStream": [("worker_id", 2, "string")],
    "WorkerInitRequest": [
        ("host_version", 1, "string"), ("capabilities", 2, "string", "map:string"),
        ("worker_directory", 4, "string"), ("function_app_directory", 5, "string"),
    ],
    "WorkerInitResponse": [
        ("worker_version", 1, "string"), ("capabilities", 2, "string", "map:string"),
        ("result", 3, "StatusResult"), ("worker_metadata", 4, "WorkerMetadata"),
    ],
    "WorkerMetadata": [
        ("runtime_name", 1, "string"), ("runtime_version", 2, "string"), ("worker_version", 3, "string"),
        ("worker_bitness", 4, "string"), ("custom_properties", 5, "string", "map:string"),
    ],
    "StatusResult": [
        ("result", 1, "string"), ("exception", 2, "RpcException"), ("logs", 3, "RpcLog", "repeated"),
        ("status", 4, "StatusResult.Status"),
    ],
    "WorkerTerminate": [("grace_period", 1, "Duration")],
    "FunctionEnvironmentReloadResponse": [
        ("worker_metadata", 1, "WorkerMetadata"), ("capabilities", 2, "string", "map:string"),
        ("result", 3, "StatusResult"),
    ],
    "FunctionLoadRequest": [
        ("function_id", 1, "string"), ("metadata", 2, "RpcFunctionMetadata"),
        ("managed_dependency_enabled", 3, "bool"),
    ],
    "FunctionLoadResponse": [
        ("function_id", 1, "string"), ("result", 2, "StatusResult"), ("is_dependency_downloaded", 3, "bool"),
    ],
    "RpcFunctionMetadata": [
        ("directory", 1, "string"), ("script_file", 2, "string"), ("entry_point", 3, "string"),
        ("name", 4, "string"), ("bindings", 6, "BindingInfo", "map:string"), ("is_proxy", 7, "bool"),
        ("status", 8, "StatusResult"), ("language", 9, "string"), ("raw_bindings", 10, "string", "repeated"),
        ("function_id", 13, "string"), ("managed_dependency_enabled", 14, "bool"),
        ("retry_options", 15, "RpcRetryOptions"), ("properties", 16, "string", "map:string"),
    ],
    "FunctionsMetadataRequest": [("function_app_directory", 1, "string")],
    "FunctionMetadataResponse": [
        ("function_metadata_results", 1, "RpcFunctionMetadata", "repeated"), ("result", 2, "StatusResult"),
        ("use_default_metadata_indexing", 3, "bool"),
    ],
    "InvocationRequest": [
        ("invocation_id", 1, "string"), ("function_id", 2, "string"),
        ("input_data", 3, "ParameterBinding", "repeated"), ("trigger_metadata", 4, "TypedData", "map:string"),
        ("trace_context", 5, "RpcTraceContext"), ("retry_context", 6, "RetryContext"),
    ],
    "RpcTraceContext": [
        ("trace_parent", 1, "string"), ("trace_state", 2, "string"), ("attributes", 3, "string", "map:string"),
    ],
    "RetryContext": [
        ("retry_count", 1, "int32"), ("max_retry_count", 2, "int32"), ("exception", 3, "RpcException"),
    ],
    "InvocationCancel": [("grace_period", 1, "Duration"), ("invocation_id", 2, "string")],
    "InvocationResponse": [
        ("invocation_id", 1, "string"), ("output_data", 2, "ParameterBinding", "repeated"),
        ("result", 3, "StatusResult"), ("return_value", 4, "TypedData"),
    ],
    "TypedData": [
        ("string", 1, "string", "oneof:data"), ("json", 2, "string", "oneof:data"),
        ("bytes", 3, "bytes", "oneof:data"), ("stream", 4, "bytes", "oneof:data"),
        ("http", 5, "RpcHttp", "oneof:data"), ("int", 6, "sint64", "oneof:data"),
        ("double", 7, "double", "oneof:data"), ("collection_bytes", 8, "CollectionBytes", "oneof:data"),
        ("collection_string", 9, "CollectionString", "oneof:data"),
        ("collection_double", 10, "CollectionDouble", "oneof:data"),
        ("collection_sint64", 11, "CollectionSInt64", "oneof:data"),
    ],
    "CollectionString": [("string", 1, "string", "repeated")],
    "CollectionBytes": [("bytes", 1, "bytes", "repeated")],
    "CollectionDouble": [("double", 1, "double", "repeated")],
    "CollectionSInt64": [("sint64", 1, "sint64", "repeated")],
    "ParameterBinding": [("name", 1, "string"), ("data", 2, "TypedData", "oneof:rpc_data")],
    "BindingInfo": [
        ("type", 2, "string"), ("direction", 3, "BindingInfo.Direction"), ("data_type", 4, "BindingInfo.DataType"),
        ("properties", 5, "string", "map:string"),
    ],
    "RpcLog": [
        ("invocation_id", 1, "string"), ("category", 2, "string"), ("level", 3, "RpcLog.Level"),
        ("message", 4, "string"), ("event_id", 5, "string"), ("exception", 6, "RpcException"),
        ("properties", 7, "string"), ("log_category", 8, "RpcLog.RpcLogCategory"),
    ],
    "RpcException": [
        ("stack_trace", 1, "string"), ("message", 2, "string"), ("source", 3, "string"),
        ("is_user_exception", 4, "bool"), ("type", 5, "string"),
    ],
    "RpcHttpCookie": [
        ("name", 1, "string"), ("value", 2, "string"), ("domain", 3, "NullableString"),
        ("path", 4, "NullableString"), ("expires", 5, "NullableTimestamp"), ("secure", 6, "NullableBool"),
        ("http_only", 7, "NullableBool"), ("same_site", 8, "RpcHttpCookie.SameSite"),
        ("max_age", 9, "NullableDouble"),
    ],
    "RpcHttp": [
        ("method", 1, "string"), ("url", 2, "string"), ("headers", 3, "string", "map:string"),
        ("body", 4, "TypedData"), ("params", 10, "string", "map:string"), ("status_code", 12, "string"),
        ("query", 15, "string", "map:string"), ("enable_content_negotiation", 16, "bool"),
        ("rawBody", 17, "TypedData"), ("cookies", 19, "RpcHttpCookie", "repeated"),
    ],
    "RpcRetryOptions": [
        ("max_retry_count", 2, "int32"), ("delay_interval", 3, "Duration"), ("minimum_interval", 4, "Duration"),
        ("maximum_interval", 5, "Duration"), ("retry_strategy", 6, "RpcRetryOptions.RetryStrategy"),
    ],
    # shared/NullableTypes.proto (package-less there; declared in this package here)
    "NullableString": [("value", 1, "string", "oneof:string")],
    "NullableDouble": [("value", 1, "double", "oneof:double")],
    "NullableBool": [("value", 1, "bool", "oneof:bool")],
    "NullableTimestamp": [("value", 1, "Timestamp", "oneof:timestamp")],
}


def _is_enum(type_name: str) -> bool:
    owner, _, enum = type_name.partition(".")
    return bool(enum) and enum in _ENUMS.get(owner, {})


def _set_type(field: Any, type_name: str) -> None:
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    elif type_name in _WELL_KNOWN:
        field.type = _F.TYPE_MESSAGE
        field.type_name = _WELL_KNOWN[type_name]
    elif _is_enum(type_name):
        field.type = _F.TYPE_ENUM
        field.type_name = f".{PACKAGE}.{type_name}"
    else:
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{type_name}"


def _entry_name(field_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="devhost/FunctionRpc.proto", package=PACKAGE, syntax="proto3",
        dependency=["google/protobuf/duration.proto", "google/protobuf/timestamp.proto"],
    )
    for message_name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=message_name)
        for enum_name, values in _ENUMS.get(message_name, {}).items():
            enum = message.enum_type.add(name=enum_name)
            for value_name, number in values:
                enum.value.add(name=value_name, number=number)
        oneofs: dict[str, int] = {}
        for spec in fields:
            name, number, type_name = spec[0], int(spec[1]), str(spec[2])
            kind = str(spec[3]) if len(spec) > 3 else ""
            field = message.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
            if kind.startswith("map:"):
                entry = message.nested_type.add(name=_entry_name(name))
                entry.options.map_entry = True
                key = entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL)
                _set_type(key, kind[4:])
                value = entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL)
                _set_type(value, type_name)
                field.label = _F.LABEL_REPEATED
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{PACKAGE}.{message_name}.{entry.name}"
                continue
            _set_type(field, type_name)
            if kind == "repeated":
                field.label = _F.LABEL_REPEATED
            elif kind.startswith("oneof:"):
                group = kind[6:]
                if group not in oneofs:
                    oneofs[group] = len(message.oneof_decl)
                    message.oneof_decl.add(name=group)
                field.oneof_index = oneofs[group]
    return proto


def _build() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    for known in (duration_pb2, timestamp_pb2):
        pool.AddSerializedFile(known.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(_file().SerializeToString())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
            for name in _MESSAGES}


_CLASSES = _build()
StreamingMessage: Any = _CLASSES["StreamingMessage"]
StartStream: Any = _CLASSES["StartStream"]
WorkerInitRequest: Any = _CLASSES["WorkerInitRequest"]
WorkerInitResponse: Any = _CLASSES["WorkerInitResponse"]
WorkerMetadata: Any = _CLASSES["WorkerMetadata"]
StatusResult: Any = _CLASSES["StatusResult"]
WorkerTerminate: Any = _CLASSES["WorkerTerminate"]
FunctionEnvironmentReloadResponse: Any = _CLASSES["FunctionEnvironmentReloadResponse"]
FunctionLoadRequest: Any = _CLASSES["FunctionLoadRequest"]
FunctionLoadResponse: Any = _CLASSES["FunctionLoadResponse"]
RpcFunctionMetadata: Any = _CLASSES["RpcFunctionMetadata"]
FunctionsMetadataRequest: Any = _CLASSES["FunctionsMetadataRequest"]
FunctionMetadataResponse: Any = _CLASSES["FunctionMetadataResponse"]
InvocationRequest: Any = _CLASSES["InvocationRequest"]
RpcTraceContext: Any = _CLASSES["RpcTraceContext"]
RetryContext: Any = _CLASSES["RetryContext"]
InvocationCancel: Any = _CLASSES["InvocationCancel"]
InvocationResponse: Any = _CLASSES["InvocationResponse"]
TypedData: Any = _CLASSES["TypedData"]
CollectionString: Any = _CLASSES["CollectionString"]
CollectionBytes: Any = _CLASSES["CollectionBytes"]
CollectionDouble: Any = _CLASSES["CollectionDouble"]
CollectionSInt64: Any = _CLASSES["CollectionSInt64"]
ParameterBinding: Any = _CLASSES["ParameterBinding"]
BindingInfo: Any = _CLASSES["BindingInfo"]
RpcLog: Any = _CLASSES["RpcLog"]
RpcException: Any = _CLASSES["RpcException"]
RpcHttpCookie: Any = _CLASSES["RpcHttpCookie"]
RpcHttp: Any = _CLASSES["RpcHttp"]
RpcRetryOptions: Any = _CLASSES["RpcRetryOptions"]
NullableString: Any = _CLASSES["NullableString"]
NullableDouble: Any = _CLASSES["NullableDouble"]
NullableBool: Any = _CLASSES["NullableBool"]
NullableTimestamp: Any = _CLASSES["NullableTimestamp"]
