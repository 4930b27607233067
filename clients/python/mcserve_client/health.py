"""grpc.health.v1.Health/Check without generated stubs: its two messages described at run time."""
from __future__ import annotations

from typing import Any, Tuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .datatypes import HealthStatus

CHECK_METHOD = "/grpc.health.v1.Health/Check"


def _describe() -> descriptor_pb2.FileDescriptorProto:
    """HealthCheckRequest{string service = 1} and HealthCheckResponse{ServingStatus status = 1}."""
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="mcserve_client/grpc_health_v1.proto", package="grpc.health.v1",
                                              syntax="proto3")
    request = file.message_type.add(name="HealthCheckRequest")
    request.field.add(name="service", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    response = file.message_type.add(name="HealthCheckResponse")
    response.field.add(name="status", number=1, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                       type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    status = response.enum_type.add(name="ServingStatus")
    for number, name in enumerate(("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")):
        status.value.add(name=name, number=number)
    return file


def _message_classes() -> Tuple[Any, Any]:
    """(HealthCheckRequest, HealthCheckResponse) classes, in a private descriptor pool."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_describe())
    factory = message_factory.MessageFactory(pool)
    request = factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest"))
    response = factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse"))
    return request, response


HealthCheckRequest, HealthCheckResponse = _message_classes()


def status_of(response: Any) -> HealthStatus:
    """The response's status as a HealthStatus (an unknown number → UNKNOWN)."""
    names = HealthCheckResponse.DESCRIPTOR.fields_by_name["status"].enum_type.values_by_number
    value = names.get(response.status)
    return HealthStatus(value.name) if value is not None else HealthStatus.UNKNOWN
