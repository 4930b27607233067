// Decoding a request ourselves (methods registered "raw", as grpc::ByteBuffer), so that what
// protobuf would reject before our handler runs — a string field holding invalid UTF-8, a message
// over the size limit, malformed bytes — gets INVALID_ARGUMENT naming the field instead of gRPC's
// generic error.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"

namespace mcserve::server {

// Parses `buffer` into `out`. INVALID_ARGUMENT when it is larger than `max_bytes` (naming the limit
// flag), when a string field is not UTF-8 (naming the field, e.g. `stop.stop`), or when the bytes are
// not a `out`-typed message. Any thread.
absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, size_t max_bytes, google::protobuf::Message* out);

// The dotted path of the first string field in `bytes` (a serialized `type` message) that is not
// valid UTF-8; "" if there is none or the bytes do not parse. Any thread.
std::string FindInvalidUtf8Field(const google::protobuf::Descriptor& type, std::string_view bytes);

// Serializes `message` into `out` for a raw method's response. Any thread.
void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out);

}  // namespace mcserve::server
