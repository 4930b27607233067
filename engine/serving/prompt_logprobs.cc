#include "engine/serving/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mcserve::engine {

float TokenLogProb(std::span<const float> row, int32_t token) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : row) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max);
  return static_cast<float>(static_cast<double>(row[token]) - max - std::log(sum));
}

}  // namespace mcserve::engine
