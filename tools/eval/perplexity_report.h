// Output of mcserve-eval perplexity: a human table and a JSON object. Any thread.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "tools/eval/perplexity.h"

namespace mcserve::tools {

// The totals and one row per position bucket (tokens, mean NLL, perplexity).
std::string PerplexityTable(const PerplexityResult& result);

// Every number of `result`: totals and the buckets (begin, end, tokens, nll_sum, mean_nll, perplexity).
nlohmann::json PerplexityJson(const PerplexityResult& result);

}  // namespace mcserve::tools
