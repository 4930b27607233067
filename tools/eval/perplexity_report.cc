#include "tools/eval/perplexity_report.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace mcserve::tools {
namespace {

double MeanNll(const PositionBucket& b) { return b.count > 0 ? b.nll_sum / static_cast<double>(b.count) : 0; }

}  // namespace

std::string PerplexityTable(const PerplexityResult& r) {
  std::string out = absl::StrFormat(
      "text tokens %d, windows %d of %d, scored tokens %d\nperplexity %.4f (mean NLL %.5f nats/token)\n\n",
      r.stream_tokens, r.windows, r.windows_available, r.predictions, r.perplexity, r.mean_nll);
  absl::StrAppendFormat(&out, "%-17s %10s %10s %12s\n", "positions", "tokens", "mean NLL", "perplexity");
  for (const PositionBucket& b : r.buckets) {
    const std::string range = absl::StrFormat("[%d, %d)", b.begin, b.end);
    absl::StrAppendFormat(&out, "%-17s %10d %10.5f %12.4f\n", range, b.count, MeanNll(b), std::exp(MeanNll(b)));
  }
  return out;
}

nlohmann::json PerplexityJson(const PerplexityResult& r) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const PositionBucket& b : r.buckets) {
    buckets.push_back({{"begin", b.begin}, {"end", b.end}, {"tokens", b.count}, {"nll_sum", b.nll_sum},
                       {"mean_nll", MeanNll(b)}, {"perplexity", std::exp(MeanNll(b))}});
  }
  return {{"text_tokens", r.stream_tokens}, {"windows_available", r.windows_available}, {"windows", r.windows},
          {"scored_tokens", r.predictions},  {"nll_sum", r.nll_sum},                       {"mean_nll", r.mean_nll},
          {"perplexity", r.perplexity},      {"buckets", buckets}};
}

}  // namespace mcserve::tools
