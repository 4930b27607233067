// The OpenAI-compatible `/v1/chat/completions` request: its messages rendered by the model's chat
// template into prompt ids (also what /tokenize does with messages), and its body parsed into a
// CompletionRequest (the fields it shares with completions, plus max_completion_tokens and
// add_generation_prompt). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/http/chat_template_config.h"
#include "server/http/openai_completion.h"

namespace mcserve::server {

// The roles a message may have.
inline constexpr const char* kChatRoles[] = {"system", "developer", "user", "assistant", "tool"};

// `messages` (a non-empty array of {role, content: string | [{type: "text", text}]}) through the
// template, then tokenized: the template's bos_token / eos_token text becomes those ids, the rest is
// encoded without a BOS (the template adds its own). InvalidArgument naming the field for bad
// messages, when the model has no chat template, or when the template refuses them
// (raise_exception); Internal for a template that cannot be used.
absl::StatusOr<std::vector<int32_t>> ChatPromptIds(const nlohmann::json& messages, bool add_generation_prompt,
                                                   const ChatTemplateConfig& chat, const engine::Tokenizer& tokenizer);

// Parses a chat completions body. InvalidArgument naming the field for anything malformed or
// unsupported (logprobs, top_logprobs, echo, tools, response_format ...), as ParseCompletionRequest.
absl::StatusOr<CompletionRequest> ParseChatRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                   const CompletionLimits& limits, const ChatTemplateConfig& chat);

}  // namespace mcserve::server
