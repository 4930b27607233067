#include "server/grpc/request_decoder.h"

#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/str_cat.h"
#include "engine/model/tokenizer.h"

namespace mcserve::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// The whole buffer as one string (gRPC hands it over in slices).
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// Walks one message's fields; returns the path of the first non-UTF-8 string field, else "".
std::string Walk(const google::protobuf::Descriptor& type, std::string_view bytes, const std::string& prefix) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const FieldDescriptor* field = type.FindFieldByNumber(static_cast<int>(WireFormatLite::GetTagFieldNumber(tag)));
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    const bool string_or_message = field != nullptr && (field->type() == FieldDescriptor::TYPE_STRING ||
                                                        field->type() == FieldDescriptor::TYPE_MESSAGE);
    if (!delimited || !string_or_message) {
      if (!WireFormatLite::SkipField(&in, tag)) return "";
      continue;
    }
    uint32_t length = 0;
    std::string value;
    if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length))) return "";
    const std::string path = prefix.empty() ? field->name() : absl::StrCat(prefix, ".", field->name());
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (!engine::IsValidUtf8(value)) return path;
    } else if (std::string inner = Walk(*field->message_type(), value, path); !inner.empty()) {
      return inner;
    }
  }
  return "";
}

}  // namespace

std::string FindInvalidUtf8Field(const google::protobuf::Descriptor& type, std::string_view bytes) {
  return Walk(type, bytes, "");
}

absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, size_t max_bytes, google::protobuf::Message* out) {
  const size_t size = buffer.Length();
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("request: the message is ", size,
                                                   " bytes, over the server's limit of ", max_bytes,
                                                   " (--max-request-bytes)"));
  }
  const std::string bytes = Flatten(buffer);
  if (bytes.size() != size) return absl::InvalidArgumentError("request: the message could not be read");
  {
    google::protobuf::LogSilencer quiet;  // protobuf would log each bad string: a client could flood the log
    if (out->ParseFromString(bytes)) return absl::OkStatus();
  }
  const std::string field = FindInvalidUtf8Field(*out->GetDescriptor(), bytes);
  if (!field.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": not valid UTF-8"));
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ", out->GetDescriptor()->full_name(), " (malformed protobuf)"));
}

void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  *out = grpc::ByteBuffer(&slice, 1);
}

}  // namespace mcserve::server
