#include "tools/eval/passkey_score.h"

namespace mcserve::tools {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

bool PasskeyAnswerIsCorrect(std::string_view generated, std::string_view key) {
  size_t start = 0;
  while (start < generated.size() && IsSpace(generated[start])) ++start;
  const std::string_view answer = generated.substr(start);
  if (key.empty() || answer.substr(0, key.size()) != key) return false;
  return answer.size() == key.size() || !IsDigit(answer[key.size()]);
}

}  // namespace mcserve::tools
