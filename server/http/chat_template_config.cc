#include "server/http/chat_template_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

// A special token's text: a string, or an AddedToken object's "content".
void SpecialToken(const Json& config, const char* name, std::string* out) {
  auto it = config.find(name);
  if (it == config.end()) return;
  if (it->is_string()) *out = it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    *out = (*it)["content"].get<std::string>();
  }
}

// The template's source: a string, or the "default" entry of a list of {name, template}.
const Json* TemplateSource(const Json& value) {
  if (value.is_string()) return &value;
  if (!value.is_array()) return nullptr;
  for (const Json& entry : value) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return &entry["template"];
    }
  }
  return nullptr;
}

}  // namespace

ChatTemplateConfig LoadChatTemplateConfig(const std::string& model_dir) {
  ChatTemplateConfig out;
  const std::string path = model_dir + "/tokenizer_config.json";
  std::ifstream file(path);
  if (!file) return out;
  std::stringstream text;
  text << file.rdbuf();
  const Json config = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) {
    out.error = absl::StrCat(path, " is not a JSON object");
    return out;
  }
  SpecialToken(config, "bos_token", &out.bos_token);
  SpecialToken(config, "eos_token", &out.eos_token);
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return out;
  const Json* source = TemplateSource(*it);
  if (source == nullptr) {
    out.error = absl::StrCat(path, ": chat_template must be a string or a list with a \"default\" template");
    return out;
  }
  auto parsed = ChatTemplate::Parse(source->get<std::string>());
  if (!parsed.ok()) {
    out.error = absl::StrCat(path, ": ", parsed.status().message());
    return out;
  }
  out.chat_template = std::move(*parsed);
  return out;
}

}  // namespace mcserve::server
