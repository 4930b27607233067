#include "clients/cpp/cli_output.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace mcserve::client {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) {
    return "{}";  // only for messages with invalid UTF-8 in a string, which the server never sends
  }
  return out;
}

std::string ToText(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(message, &out);
  return out;
}

std::string FinishReasonName(v1::FinishReason reason) {
  absl::string_view name = v1::FinishReason_Name(reason);
  absl::ConsumePrefix(&name, "FINISH_REASON_");
  return absl::AsciiStrToLower(name);
}

std::string SummaryLine(const std::string& request_id, const v1::Completion& c) {
  std::string line = absl::StrCat("request_id=", request_id, " finish_reason=", FinishReasonName(c.finish_reason()));
  if (!c.stop_string().empty()) absl::StrAppend(&line, " stop_string=\"", absl::Utf8SafeCEscape(c.stop_string()), "\"");
  if (c.has_stop_token_id()) absl::StrAppend(&line, " stop_token_id=", c.stop_token_id());
  absl::StrAppend(&line, " prompt_tokens=", c.prompt_tokens(), " cached_prompt_tokens=", c.cached_prompt_tokens(),
                  " generated_tokens=", c.generated_tokens(),
                  absl::StrFormat(" ttft_s=%.4f e2e_s=%.4f", c.time_to_first_token_seconds(), c.e2e_seconds()));
  return line;
}

void AppendResponse(const v1::GenerateResponse& response, v1::GenerateResponse* total) {
  total->set_request_id(response.request_id());
  total->mutable_token_ids()->MergeFrom(response.token_ids());
  total->mutable_text()->append(response.text());
  total->mutable_logprobs()->MergeFrom(response.logprobs());
  total->set_generated_tokens(response.generated_tokens());
  if (response.has_complete()) *total->mutable_complete() = response.complete();
}

}  // namespace mcserve::client
