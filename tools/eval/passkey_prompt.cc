#include "tools/eval/passkey_prompt.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"

namespace mcserve::tools {
namespace {

// The three template pieces for `key`, tokenized without BOS.
struct TemplateIds {
  std::vector<int32_t> intro, needle, question;
};

absl::StatusOr<TemplateIds> EncodeTemplate(const engine::Tokenizer& tokenizer, const PasskeyTemplate& templ,
                                           const std::string& key) {
  TemplateIds t;
  MCSERVE_ASSIGN_OR_RETURN(t.intro, tokenizer.Encode(templ.intro, /*add_bos=*/false));
  const std::string needle = absl::StrReplaceAll(std::string(templ.needle), {{"{key}", key}});
  MCSERVE_ASSIGN_OR_RETURN(t.needle, tokenizer.Encode(needle, /*add_bos=*/false));
  MCSERVE_ASSIGN_OR_RETURN(t.question, tokenizer.Encode(templ.question, /*add_bos=*/false));
  return t;
}

int64_t Size(const TemplateIds& t) {
  return 1 + static_cast<int64_t>(t.intro.size() + t.needle.size() + t.question.size());
}

void Append(std::vector<int32_t>& out, std::span<const int32_t> ids) { out.insert(out.end(), ids.begin(), ids.end()); }

}  // namespace

absl::StatusOr<PasskeyTemplate> PasskeyTemplateByName(std::string_view name) {
  for (const PasskeyTemplate& templ : {kStandardPasskeyTemplate, kTrainedPasskeyTemplate}) {
    if (templ.name == name) return templ;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown passkey template '", std::string(name),
                                                 "' (expected standard or trained)"));
}

bool StartsWord(const engine::Tokenizer& tokenizer, std::span<const int32_t> ids, size_t i) {
  if (i == 0) return true;
  auto before = tokenizer.Decode(ids.subspan(i - 1, 1));
  auto pair = tokenizer.Decode(ids.subspan(i - 1, 2));
  if (!before.ok() || !pair.ok()) return false;
  return pair->size() > before->size() && pair->compare(0, before->size(), *before) == 0 &&
         (*pair)[before->size()] == ' ';
}

absl::StatusOr<int64_t> PasskeyTemplateTokens(const engine::Tokenizer& tokenizer, const PasskeyTemplate& templ,
                                              const std::string& key) {
  MCSERVE_ASSIGN_OR_RETURN(TemplateIds t, EncodeTemplate(tokenizer, templ, key));
  return Size(t);
}

absl::StatusOr<PasskeyPrompt> BuildPasskeyPrompt(const engine::Tokenizer& tokenizer, const PasskeyTemplate& templ,
                                                 std::span<const int32_t> haystack, int64_t filler_start,
                                                 int64_t length, double depth, const std::string& key) {
  if (!(depth >= 0 && depth <= 1)) return absl::InvalidArgumentError(absl::StrCat("depth ", depth, " is not in [0, 1]"));
  MCSERVE_ASSIGN_OR_RETURN(TemplateIds t, EncodeTemplate(tokenizer, templ, key));
  PasskeyPrompt prompt;
  prompt.filler_tokens = length - Size(t);
  if (prompt.filler_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("length ", length, " is shorter than the passkey template alone (", Size(t), " tokens)"));
  }
  if (filler_start < 0 || filler_start + prompt.filler_tokens > static_cast<int64_t>(haystack.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the haystack (", haystack.size(), " tokens) has no ",
                                                   prompt.filler_tokens, " filler tokens from token ", filler_start));
  }
  const auto filler = haystack.subspan(filler_start, prompt.filler_tokens);
  auto split = static_cast<size_t>(std::llround(depth * static_cast<double>(prompt.filler_tokens)));
  while (split < filler.size() && !StartsWord(tokenizer, filler, split)) ++split;
  prompt.depth = filler.empty() ? 0 : static_cast<double>(split) / static_cast<double>(filler.size());
  prompt.ids.push_back(static_cast<int32_t>(tokenizer.bos_id()));
  Append(prompt.ids, t.intro);
  Append(prompt.ids, filler.first(split));
  prompt.needle_position = static_cast<int64_t>(prompt.ids.size());
  Append(prompt.ids, t.needle);
  Append(prompt.ids, filler.subspan(split));
  Append(prompt.ids, t.question);
  return prompt;
}

}  // namespace mcserve::tools
