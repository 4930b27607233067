#include "engine/model/read_hope_config.h"

#include <numeric>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

using nlohmann::json;

// Every key a hope config.json may hold (docs/model-format.md, `hope`).
const std::set<std::string>& HopeKeys() {
  static const std::set<std::string> keys = {
      "model_type", "architectures", "torch_dtype", "transformers_version", "hidden_size", "num_hidden_layers",
      "num_heads", "head_dim", "vocab_size", "norm_eps", "tie_word_embeddings", "bos_token_id", "eos_token_id",
      "conv_size", "memory_expansion", "chunk_size_other", "chunk_size_mem", "memory_input", "scalar_memory_skip",
      "eta_activation", "eta_max", "eta_scale", "alpha_activation", "eta_clamp", "adaptive_q", "w1_rule",
      "read_index", "chunk_anchor", "readout_mode", "momentum", "momentum_beta", "grad_scale", "conv_placement",
      "output_gate", "cms_norm", "cms_adaptive", "cms_teach_signal", "cms_update_on_generated", "cms_levels",
      "cms_update_terms", "flush_partial_chunks", "multi_turn_positions", "cms_state_scope", "gate_granularity",
      "memory_activation", "fast_weight_dtype", "shared_values", "mixer", "final_norm"};
  return keys;
}

absl::Status CheckKeys(const ConfigReader& r) {
  for (const auto& [key, value] : r.object().items()) {
    if (key == "memory_caching") continue;  // parsed with every family's (ParseMcConfig)
    if (!HopeKeys().contains(key)) return r.Error(absl::StrCat("\"", key, "\" is not a hope config field"));
  }
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_heads", "head_dim", "vocab_size"}) {
    if (!r.HasValue(key)) return r.Error(absl::StrCat("hope: \"", key, "\" is required"));
  }
  return absl::OkStatus();
}

// A bool; absent or null → def. With `only` set, any other value is an error (the one choice the
// format allows today).
absl::StatusOr<bool> HopeBool(const ConfigReader& r, const char* key, bool def, std::optional<bool> only = {}) {
  bool v = def;
  if (r.HasValue(key)) {
    MCSERVE_ASSIGN_OR_RETURN(v, r.Bool(key, def));
  }
  if (only && v != *only) {
    return r.Error(absl::StrCat("\"", key, "\" is only supported as ", *only ? "true" : "false"));
  }
  return v;
}

// An integer ≥ 1; absent or null → def.
absl::StatusOr<int64_t> PositiveInt(const ConfigReader& r, const char* key, int64_t def) {
  MCSERVE_ASSIGN_OR_RETURN(int64_t v, r.Int(key, def, /*null_is_default=*/true));
  if (v < 1) return r.Error(absl::StrCat("\"", key, "\" must be an integer >= 1, got ", v));
  return v;
}

// A number > 0; absent or null → def.
absl::StatusOr<double> PositiveNumber(const ConfigReader& r, const char* key, double def) {
  MCSERVE_ASSIGN_OR_RETURN(double v, r.Float(key, def, /*null_is_default=*/true));
  MCSERVE_RETURN_IF_ERROR(r.Positive(key, v));
  return v;
}

// Fields whose only allowed value is today's default (the format names them so that a checkpoint
// trained otherwise is refused, not misread).
absl::Status CheckFixedChoices(const ConfigReader& r) {
  for (auto [key, value] : {std::pair{"alpha_activation", "sigmoid"}, std::pair{"chunk_anchor", "previous_chunk_end"},
                            std::pair{"conv_placement", "producers"}, std::pair{"cms_norm", "prenorm_residual"},
                            std::pair{"cms_teach_signal", "per_layer_backward"}, std::pair{"cms_update_terms", "chunk"},
                            std::pair{"multi_turn_positions", "continue"}, std::pair{"cms_state_scope", "request"},
                            std::pair{"gate_granularity", "token"}, std::pair{"fast_weight_dtype", "float32"},
                            std::pair{"mixer", "self_modifying_titans"}}) {
    MCSERVE_RETURN_IF_ERROR(Choice(r, key, {value}).status());
  }
  MCSERVE_RETURN_IF_ERROR(HopeBool(r, "cms_update_on_generated", false, false).status());
  MCSERVE_RETURN_IF_ERROR(HopeBool(r, "flush_partial_chunks", false, false).status());
  MCSERVE_RETURN_IF_ERROR(HopeBool(r, "shared_values", false, false).status());
  return HopeBool(r, "final_norm", true, true).status();
}

// One cms_levels entry: {chunk_size, intermediate_size, activation (swiglu), lr (0)}.
absl::StatusOr<CmsLevel> ReadLevel(const ConfigReader& parent, const json& j, size_t index) {
  const std::string name = absl::StrCat("cms_levels[", index, "]");
  if (!j.is_object()) return parent.Error(absl::StrCat("\"", name, "\" must be an object, got ", j.dump()));
  ConfigReader r(j, parent.source());
  for (const auto& [key, value] : j.items()) {
    if (key != "chunk_size" && key != "intermediate_size" && key != "activation" && key != "lr") {
      return parent.Error(absl::StrCat("\"", name, "\" has unknown key \"", key, "\""));
    }
  }
  CmsLevel level;
  for (auto [key, field] : {std::pair{"chunk_size", &level.chunk_size},
                            std::pair{"intermediate_size", &level.intermediate_size}}) {
    if (!r.HasValue(key)) return parent.Error(absl::StrCat("\"", name, ".", key, "\" is required"));
    MCSERVE_ASSIGN_OR_RETURN(*field, r.Int(key, 0));
    if (*field < 1) return parent.Error(absl::StrCat("\"", name, ".", key, "\" must be an integer >= 1"));
  }
  auto act = Choice(r, "activation", {"swiglu", "gelu"});
  if (!act.ok()) return parent.Error(absl::StrCat("\"", name, "\": ", act.status().message()));
  level.swiglu = *act == 0;
  MCSERVE_ASSIGN_OR_RETURN(level.lr, r.Float("lr", 0.0, /*null_is_default=*/true));
  if (level.lr < 0) return parent.Error(absl::StrCat("\"", name, ".lr\" must be a number >= 0"));
  return level;
}

absl::Status ReadLevels(const ConfigReader& r, HopeConfig& h) {
  if (!r.HasValue("cms_levels") || !r.object().at("cms_levels").is_array() ||
      r.object().at("cms_levels").empty()) {
    return r.Error("hope: \"cms_levels\" must be a non-empty list of levels");
  }
  const json& levels = r.object().at("cms_levels");
  for (size_t i = 0; i < levels.size(); ++i) {
    MCSERVE_ASSIGN_OR_RETURN(CmsLevel level, ReadLevel(r, levels[i], i));
    h.cms_levels.push_back(level);
  }
  return absl::OkStatus();
}

// The self-modifying Titans fields (A1–A11, A21).
absl::Status ReadMixerChoices(const ConfigReader& r, ModelConfig& c) {
  HopeConfig& h = c.hope;
  MCSERVE_ASSIGN_OR_RETURN(int input, Choice(r, "memory_input", {"slice", "proj"}));
  h.memory_input_proj = input == 1;
  if (!h.memory_input_proj && c.hidden_size != c.num_heads * c.head_k_dim) {
    return r.Error(absl::StrCat("\"memory_input\" \"slice\" needs hidden_size (", c.hidden_size,
                                ") = num_heads · head_dim (", c.num_heads, " · ", c.head_k_dim, "); use \"proj\""));
  }
  MCSERVE_ASSIGN_OR_RETURN(int skip, Choice(r, "scalar_memory_skip", {"none", "linear"}));
  h.scalar_memory_skip = skip == 1;
  MCSERVE_ASSIGN_OR_RETURN(int eta, Choice(r, "eta_activation", {"sigmoid", "softplus"}));
  h.eta_softplus = eta == 1;
  MCSERVE_ASSIGN_OR_RETURN(h.eta_max, PositiveNumber(r, "eta_max", 1.0));
  MCSERVE_ASSIGN_OR_RETURN(h.eta_scale, PositiveNumber(r, "eta_scale", 1.0));
  MCSERVE_ASSIGN_OR_RETURN(h.eta_clamp, HopeBool(r, "eta_clamp", true));
  MCSERVE_ASSIGN_OR_RETURN(h.adaptive_q, HopeBool(r, "adaptive_q", false));
  MCSERVE_ASSIGN_OR_RETURN(int w1, Choice(r, "w1_rule", {"retention", "dgd_hidden"}));
  h.w1_dgd_hidden = w1 == 1;
  MCSERVE_ASSIGN_OR_RETURN(int read, Choice(r, "read_index", {"before_write", "after_write"}));
  h.read_after_write = read == 1;
  MCSERVE_ASSIGN_OR_RETURN(int mode, Choice(r, "readout_mode", {"R", "A"}));
  h.readout_anchor = mode == 1;
  MCSERVE_ASSIGN_OR_RETURN(int momentum, Choice(r, "momentum", {"none", "constant", "data"}));
  h.momentum = static_cast<HopeMomentumKind>(momentum);
  MCSERVE_ASSIGN_OR_RETURN(h.momentum_beta, r.Float("momentum_beta", 0.9, /*null_is_default=*/true));
  if (h.momentum_beta < 0 || h.momentum_beta >= 1) {
    return r.Error(absl::StrCat("\"momentum_beta\" must be in [0, 1), got ", h.momentum_beta));
  }
  MCSERVE_ASSIGN_OR_RETURN(h.grad_scale, PositiveNumber(r, "grad_scale", 2.0));
  MCSERVE_ASSIGN_OR_RETURN(int gate, Choice(r, "output_gate", {"rmsnorm_silu_gate", "rmsnorm"}));
  h.output_gate = gate == 0;
  MCSERVE_ASSIGN_OR_RETURN(int act, Choice(r, "memory_activation", {"silu", "gelu"}));
  h.memory_gelu = act == 1;
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadHopeConfig(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_RETURN_IF_ERROR(CheckKeys(r));
  MCSERVE_ASSIGN_OR_RETURN(c.num_heads, PositiveInt(r, "num_heads", 1));
  MCSERVE_ASSIGN_OR_RETURN(int64_t head_dim, PositiveInt(r, "head_dim", 1));
  c.head_k_dim = c.head_v_dim = head_dim;
  c.num_kv_heads = c.num_v_heads = c.num_heads;
  c.key_dim = c.value_dim = c.num_heads * head_dim;
  MCSERVE_ASSIGN_OR_RETURN(c.conv_size, PositiveInt(r, "conv_size", 4));
  c.use_short_conv = false;  // the mixer runs its own conv inside the memory scan
  c.use_gate = false;
  HopeConfig& h = c.hope;
  MCSERVE_ASSIGN_OR_RETURN(h.memory_expansion, PositiveInt(r, "memory_expansion", 2));
  MCSERVE_ASSIGN_OR_RETURN(h.chunk_size_other, PositiveInt(r, "chunk_size_other", 16));
  MCSERVE_ASSIGN_OR_RETURN(h.chunk_size_mem, PositiveInt(r, "chunk_size_mem", 16));
  MCSERVE_RETURN_IF_ERROR(ReadMixerChoices(r, c));
  MCSERVE_RETURN_IF_ERROR(CheckFixedChoices(r));
  MCSERVE_RETURN_IF_ERROR(ReadLevels(r, h));
  MCSERVE_ASSIGN_OR_RETURN(h.cms_adaptive, HopeBool(r, "cms_adaptive", false));
  if (h.cms_adaptive && c.memory_caching) {
    return absl::UnimplementedError(absl::StrCat(
        r.source(), ": hope: \"memory_caching\" is not defined with \"cms_adaptive\": true"));
  }
  if (std::lcm(h.chunk_size_other, h.chunk_size_mem) > (int64_t{1} << 30)) {
    return r.Error("hope: the least common multiple of \"chunk_size_other\" and \"chunk_size_mem\" must be <= 2^30");
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
