// How mcserve-cli prints results: proto JSON (--json), protobuf text format, the summary line.
#pragma once

#include <string>

#include <google/protobuf/message.h>

#include "mcserve/v1/generation.pb.h"

namespace mcserve::client {

// `message` as one line of proto3 JSON with the proto's field names and every field, defaults too
// (64-bit integers are strings, enums their names: the standard mapping, as grpcurl prints).
std::string ToJson(const google::protobuf::Message& message);
// `message` in protobuf text format (one `field: value` per line).
std::string ToText(const google::protobuf::Message& message);
// "length", "stop", "cancelled" or "unspecified".
std::string FinishReasonName(v1::FinishReason reason);
// `request_id=... finish_reason=... prompt_tokens=... ... ttft_s=... e2e_s=...` for stderr.
std::string SummaryLine(const std::string& request_id, const v1::Completion& completion);
// Folds one streamed response into `total`: request id, tokens, text and logprobs appended, the
// cumulative count and the completion taken over. After the whole stream, `total` is the result.
void AppendResponse(const v1::GenerateResponse& response, v1::GenerateResponse* total);

}  // namespace mcserve::client
