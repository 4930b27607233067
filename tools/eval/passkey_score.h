// Scoring of a passkey answer (mcserve-eval passkey). Any thread.
#pragma once

#include <string_view>

namespace mcserve::tools {

// True iff `generated` (the greedy continuation of "... The pass key is"), with its leading
// whitespace stripped, starts with exactly the digits of `key` and the next character, if any, is
// not a digit: "68213", " 68213.", "68213 is" are correct for 68213; "6821" (missing digits, e.g.
// cut off by the token limit), "682135" (extra digits), "6 8213", "x68213" and "" are not.
// `key` must be non-empty digits.
bool PasskeyAnswerIsCorrect(std::string_view generated, std::string_view key);

}  // namespace mcserve::tools
