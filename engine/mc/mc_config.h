// McConfig: a model's Memory Caching settings (docs/memory-caching.md), from the `memory_caching`
// object of config.json and/or command-line overrides. Immutable after load.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mcserve::engine {

enum class McAggregation { kResidual, kGrm, kSoup, kSsc, kMean };
enum class McSegmentation { kConstant, kLogarithmic };
enum class McInitMode { kIndependent, kCheckpoint };
enum class McGate { kQ, kUProj };
enum class McPool { kMean, kSum };
enum class McMeanCombine { kAdd, kAverage };

struct McConfig {
  McAggregation aggregation = McAggregation::kGrm;
  McSegmentation segmentation = McSegmentation::kConstant;
  int64_t segment_size = 256;  // constant segmentation
  McInitMode init_mode = McInitMode::kIndependent;
  std::optional<McGate> gate;  // unset: u_proj when the checkpoint has it, else q
  McPool pool = McPool::kMean;
  int top_k = 2;               // ssc
  McMeanCombine mean_combine = McMeanCombine::kAdd;
  std::optional<std::vector<int>> layers;   // unset: every layer
  std::optional<bool> swla_cross_boundary;  // unset: true in checkpoint mode, false in independent

  // Whether layer `i` runs with MC.
  bool AppliesTo(int layer) const;
  // SWLA's previous-token term across a segment boundary, resolved by init mode.
  bool SwlaCrossBoundary() const { return swla_cross_boundary.value_or(init_mode == McInitMode::kCheckpoint); }
};

// Parses the text of a `memory_caching` JSON object (null or {"aggregation": "none"} → nullopt).
// Errors name `source` and the field.
absl::StatusOr<std::optional<McConfig>> ParseMcConfig(const std::string& json_object, const std::string& source);

// Applies command-line overrides (field name → value text, e.g. {"aggregation", "ssc"},
// {"segment_size", "64"}, {"layers", "0,2"}) on top of `base` (nullopt: MC off in the model).
// "aggregation" = "none" turns MC off. Unknown fields or bad values → InvalidArgument naming them.
absl::StatusOr<std::optional<McConfig>> ApplyMcOverrides(const std::optional<McConfig>& base,
                                                         const std::map<std::string, std::string>& overrides);

// One-line description, e.g. "grm, constant segments of 256, independent, gate q, mean pool".
std::string DescribeMcConfig(const McConfig& config);

}  // namespace mcserve::engine
