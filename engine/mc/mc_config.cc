#include "engine/mc/mc_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {
namespace {

using nlohmann::json;

template <typename E>
using Names = std::vector<std::pair<const char*, E>>;

const Names<McAggregation> kAggregations = {{"residual", McAggregation::kResidual}, {"grm", McAggregation::kGrm},
                                            {"soup", McAggregation::kSoup}, {"ssc", McAggregation::kSsc},
                                            {"mean", McAggregation::kMean}};
const Names<McSegmentation> kSegmentations = {{"constant", McSegmentation::kConstant},
                                              {"logarithmic", McSegmentation::kLogarithmic}};
const Names<McInitMode> kInitModes = {{"independent", McInitMode::kIndependent},
                                      {"checkpoint", McInitMode::kCheckpoint}};
const Names<McGate> kGates = {{"q", McGate::kQ}, {"u_proj", McGate::kUProj}};
const Names<McPool> kPools = {{"mean", McPool::kMean}, {"sum", McPool::kSum}};
const Names<McMeanCombine> kCombines = {{"add", McMeanCombine::kAdd}, {"average", McMeanCombine::kAverage}};

template <typename E>
absl::StatusOr<E> Lookup(const Names<E>& names, const std::string& value, const std::string& where) {
  std::vector<std::string> allowed;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    allowed.push_back(name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": \"", value, "\" is not one of ", absl::StrJoin(allowed, ", ")));
}

template <typename E>
const char* NameOf(const Names<E>& names, E e) {
  for (const auto& [name, v] : names) {
    if (v == e) return name;
  }
  return "?";
}

absl::StatusOr<int64_t> PositiveInt(const std::string& value, const std::string& where) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", value, "\" is not a positive integer"));
  }
  return v;
}

absl::StatusOr<std::vector<int>> LayerList(const std::string& value, const std::string& where) {
  std::vector<int> layers;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    int v;
    if (!absl::SimpleAtoi(part, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", std::string(part), "\" is not a layer index"));
    }
    layers.push_back(v);
  }
  if (layers.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": empty layer list"));
  return layers;
}

// Sets one field from its text form. `aggregation: none` is handled by the callers.
absl::Status SetField(McConfig& c, const std::string& field, const std::string& value, const std::string& where) {
  if (field == "aggregation") {
    MCSERVE_ASSIGN_OR_RETURN(c.aggregation, Lookup(kAggregations, value, where));
  } else if (field == "segmentation") {
    MCSERVE_ASSIGN_OR_RETURN(c.segmentation, Lookup(kSegmentations, value, where));
  } else if (field == "segment_size") {
    MCSERVE_ASSIGN_OR_RETURN(c.segment_size, PositiveInt(value, where));
  } else if (field == "init_mode") {
    MCSERVE_ASSIGN_OR_RETURN(c.init_mode, Lookup(kInitModes, value, where));
  } else if (field == "gate") {
    MCSERVE_ASSIGN_OR_RETURN(c.gate, Lookup(kGates, value, where));
  } else if (field == "pool") {
    MCSERVE_ASSIGN_OR_RETURN(c.pool, Lookup(kPools, value, where));
  } else if (field == "top_k") {
    MCSERVE_ASSIGN_OR_RETURN(int64_t k, PositiveInt(value, where));
    c.top_k = static_cast<int>(std::min<int64_t>(k, 1 << 20));
  } else if (field == "mean_combine") {
    MCSERVE_ASSIGN_OR_RETURN(c.mean_combine, Lookup(kCombines, value, where));
  } else if (field == "layers") {
    if (value == "all") {
      c.layers.reset();
    } else {
      MCSERVE_ASSIGN_OR_RETURN(c.layers, LayerList(value, where));
    }
  } else if (field == "swla_cross_boundary") {
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", value, "\" is not true or false"));
    }
    c.swla_cross_boundary = value == "true";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ": unknown Memory Caching field"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const McConfig& c, const std::string& source) {
  if (c.aggregation == McAggregation::kMean && c.segmentation != McSegmentation::kConstant) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": memory_caching aggregation \"mean\" needs constant segmentation"));
  }
  return absl::OkStatus();
}

// The text form of a JSON field value (strings unquoted, lists as "0,1", bools and ints as written).
absl::StatusOr<std::string> FieldText(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_array()) {
    std::vector<std::string> items;
    for (const json& item : v) {
      if (!item.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat(where, ": layers must be integers"));
      items.push_back(std::to_string(item.get<int64_t>()));
    }
    return absl::StrJoin(items, ",");
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": unexpected ", v.type_name(), " ", v.dump()));
}

}  // namespace

bool McConfig::AppliesTo(int layer) const {
  return !layers || std::find(layers->begin(), layers->end(), layer) != layers->end();
}

absl::StatusOr<std::optional<McConfig>> ParseMcConfig(const std::string& json_object, const std::string& source) {
  json j;
  try {
    j = json::parse(json_object);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": memory_caching is not valid JSON: ", e.what()));
  }
  if (j.is_null()) return std::optional<McConfig>();
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": memory_caching must be an object, got ", j.type_name()));
  }
  if (j.contains("aggregation") && j["aggregation"] == "none") return std::optional<McConfig>();
  McConfig c;
  for (const auto& [field, value] : j.items()) {
    const std::string where = absl::StrCat(source, ": memory_caching.", field);
    MCSERVE_ASSIGN_OR_RETURN(std::string text, FieldText(value, where));
    MCSERVE_RETURN_IF_ERROR(SetField(c, field, text, where));
  }
  MCSERVE_RETURN_IF_ERROR(Validate(c, source));
  return std::optional<McConfig>(c);
}

absl::StatusOr<std::optional<McConfig>> ApplyMcOverrides(const std::optional<McConfig>& base,
                                                         const std::map<std::string, std::string>& overrides) {
  if (overrides.empty()) return base;
  auto agg = overrides.find("aggregation");
  if (agg != overrides.end() && agg->second == "none") return std::optional<McConfig>();
  McConfig c = base.value_or(McConfig());
  for (const auto& [field, value] : overrides) {
    MCSERVE_RETURN_IF_ERROR(SetField(c, field, value, absl::StrCat("--mc-", absl::StrReplaceAll(field, {{"_", "-"}}))));
  }
  MCSERVE_RETURN_IF_ERROR(Validate(c, "memory caching flags"));
  return std::optional<McConfig>(c);
}

std::string DescribeMcConfig(const McConfig& c) {
  std::string s = NameOf(kAggregations, c.aggregation);
  if (c.aggregation == McAggregation::kSsc) absl::StrAppend(&s, " top-", c.top_k);
  if (c.aggregation == McAggregation::kMean) absl::StrAppend(&s, " (", NameOf(kCombines, c.mean_combine), ")");
  if (c.segmentation == McSegmentation::kConstant) {
    absl::StrAppend(&s, ", constant segments of ", c.segment_size);
  } else {
    absl::StrAppend(&s, ", logarithmic segments");
  }
  absl::StrAppend(&s, ", ", NameOf(kInitModes, c.init_mode), ", gate ", c.gate ? NameOf(kGates, *c.gate) : "auto",
                  ", ", NameOf(kPools, c.pool), " pool");
  if (c.layers) absl::StrAppend(&s, ", layers ", absl::StrJoin(*c.layers, ","));
  return s;
}

}  // namespace mcserve::engine
