#include "engine/model/read_gam_config.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

// Every key a gam config.json may hold (gam_config.py: GAM_DEFAULTS, IGNORED, DERIVED).
const std::set<std::string>& GamKeys() {
  static const std::set<std::string> keys = {
      "model_type", "architectures", "torch_dtype", "transformers_version", "vocab_size", "block_size", "n_embed",
      "n_layer", "dropout", "num_memory_slots", "conv_kernel_size", "layer_norm_eps", "tie_word_embeddings", "fusion",
      "position_overflow", "overflow_position", "receptive_tokens"};
  return keys;
}

absl::Status CheckKeys(const ConfigReader& r) {
  for (const auto& [key, value] : r.object().items()) {
    if (key == "memory_caching") {
      return absl::UnimplementedError(absl::StrCat(
          r.source(), ": gam: \"memory_caching\" does not apply (GAM has no recurrent memory to cache)"));
    }
    if (!GamKeys().contains(key)) return r.Error(absl::StrCat("gam: \"", key, "\" is not a gam config field"));
  }
  return absl::OkStatus();
}

// An integer ≥ 1; absent or null → def.
absl::StatusOr<int64_t> PositiveInt(const ConfigReader& r, const char* key, int64_t def) {
  MCSERVE_ASSIGN_OR_RETURN(int64_t v, r.Int(key, def, /*null_is_default=*/true));
  if (v < 1) return r.Error(absl::StrCat("gam: \"", key, "\" must be an integer >= 1, got ", v));
  return v;
}

// The fields that only select training behaviour or the one implemented choice.
absl::Status ReadFixedFields(const ConfigReader& r) {
  MCSERVE_ASSIGN_OR_RETURN(double dropout, r.Float("dropout", 0.1, /*null_is_default=*/true));
  if (dropout < 0 || dropout >= 1) {
    return r.Error(absl::StrCat("gam: \"dropout\" must be a number in [0, 1) (training only, ignored), got ", dropout));
  }
  if (r.HasValue("tie_word_embeddings")) {
    MCSERVE_ASSIGN_OR_RETURN(bool tied, r.Bool("tie_word_embeddings", true));
    if (!tied) return r.Error("gam: \"tie_word_embeddings\" is only supported as true");
  }
  return Choice(r, "fusion", {"gated"}).status();
}

// position_overflow, overflow_position and the derived receptive_tokens.
absl::Status ReadPositions(const ConfigReader& r, ModelConfig& c) {
  GamConfig& g = c.gam;
  MCSERVE_ASSIGN_OR_RETURN(int overflow, Choice(r, "position_overflow", {"error", "clamp"}));
  g.clamp_positions = overflow == 1;
  g.receptive_tokens = c.num_hidden_layers * (g.conv_kernel_size - 1);
  MCSERVE_ASSIGN_OR_RETURN(g.overflow_position, r.Int("overflow_position", g.block_size - 1, /*null_is_default=*/true));
  if (g.overflow_position < g.receptive_tokens || g.overflow_position > g.block_size - 1) {
    return r.Error(absl::StrCat("gam: \"overflow_position\" must be an integer in [n_layer*(conv_kernel_size-1), "
                                "block_size-1] = [", g.receptive_tokens, ", ", g.block_size - 1, "], got ",
                                g.overflow_position));
  }
  MCSERVE_ASSIGN_OR_RETURN(int64_t receptive, r.Int("receptive_tokens", g.receptive_tokens, /*null_is_default=*/true));
  if (receptive != g.receptive_tokens) {
    return r.Error(absl::StrCat("gam: \"receptive_tokens\" is derived (", g.receptive_tokens, " here), got ", receptive));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadGamConfig(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_RETURN_IF_ERROR(CheckKeys(r));
  MCSERVE_ASSIGN_OR_RETURN(c.vocab_size, PositiveInt(r, "vocab_size", 10000));
  MCSERVE_ASSIGN_OR_RETURN(c.hidden_size, PositiveInt(r, "n_embed", 512));
  MCSERVE_ASSIGN_OR_RETURN(c.num_hidden_layers, PositiveInt(r, "n_layer", 6));
  GamConfig& g = c.gam;
  MCSERVE_ASSIGN_OR_RETURN(g.block_size, PositiveInt(r, "block_size", 256));
  MCSERVE_ASSIGN_OR_RETURN(g.num_memory_slots, PositiveInt(r, "num_memory_slots", 512));
  MCSERVE_ASSIGN_OR_RETURN(g.conv_kernel_size, PositiveInt(r, "conv_kernel_size", 3));
  MCSERVE_ASSIGN_OR_RETURN(double eps, r.Float("layer_norm_eps", 1e-5, /*null_is_default=*/true));
  if (!(eps > 0)) return r.Error(absl::StrCat("gam: \"layer_norm_eps\" must be a number > 0, got ", eps));
  c.norm_eps = static_cast<float>(eps);
  MCSERVE_RETURN_IF_ERROR(ReadFixedFields(r));
  MCSERVE_RETURN_IF_ERROR(ReadPositions(r, c));
  c.intermediate_size = 4 * c.hidden_size;
  c.tie_word_embeddings = true;
  c.conv_size = g.conv_kernel_size;
  c.use_short_conv = false;  // the mixer's conv is GAM's own (with bias, no activation)
  return absl::OkStatus();
}

}  // namespace mcserve::engine
