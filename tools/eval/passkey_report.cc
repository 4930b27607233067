#include "tools/eval/passkey_report.h"

#include "absl/strings/str_format.h"

namespace mcserve::tools {
namespace {

// `text` on one line: control characters (newlines, tabs) written as escapes.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string PasskeyTable(const PasskeyResult& r) {
  std::string out = absl::StrFormat("%-6s %-6s %7s %8s %8s %-8s %s\n", "trial", "key", "depth", "needle", "filler",
                                    "correct", "answer");
  for (size_t i = 0; i < r.trials.size(); ++i) {
    const PasskeyTrial& t = r.trials[i];
    absl::StrAppendFormat(&out, "%-6d %-6s %7.3f %8d %8d %-8s \"%s\"\n", i, t.key, t.depth, t.needle_position,
                          t.filler_tokens, t.correct ? "yes" : "no", OneLine(t.generated));
  }
  absl::StrAppendFormat(&out, "\naccuracy %.4f (%d of %d), haystack %d tokens\n", r.accuracy, r.correct,
                        r.trials.size(), r.haystack_tokens);
  return out;
}

nlohmann::json PasskeyJson(const PasskeyResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const PasskeyTrial& t : r.trials) {
    trials.push_back({{"key", t.key}, {"filler_start", t.filler_start}, {"filler_tokens", t.filler_tokens},
                      {"needle_position", t.needle_position}, {"depth", t.depth}, {"generated", t.generated},
                      {"correct", t.correct}});
  }
  return {{"accuracy", r.accuracy}, {"correct", r.correct}, {"trials", r.trials.size()},
          {"haystack_tokens", r.haystack_tokens}, {"results", trials}};
}

}  // namespace mcserve::tools
