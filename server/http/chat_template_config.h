// ChatTemplateConfig: a model directory's chat template (tokenizer_config.json's `chat_template`,
// parsed) and the text of the special tokens it names (bos_token, eos_token). Loaded once at start;
// read-only after, from any thread.
#pragma once

#include <memory>
#include <string>

#include "server/http/chat_template.h"

namespace mcserve::server {

struct ChatTemplateConfig {
  std::shared_ptr<const ChatTemplate> chat_template;  // null: the model has none (or it is unusable)
  std::string bos_token = "<s>", eos_token = "</s>";
  std::string error;  // why the model's template cannot be used ("" when it can, or when there is none)
};

// Reads `model_dir`/tokenizer_config.json when present. No file or no `chat_template`: no template.
// A file that is not JSON, a template that is not a string (or a list with a "default" entry), or one
// outside the supported subset: `error` says why (chat requests then get a 500 saying so).
ChatTemplateConfig LoadChatTemplateConfig(const std::string& model_dir);

}  // namespace mcserve::server
