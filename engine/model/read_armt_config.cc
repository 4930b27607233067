#include "engine/model/read_armt_config.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

// Every key an armt config.json may hold (armt_config.py: ARMT_DEFAULTS, DERIVED, IGNORED).
const std::set<std::string>& ArmtKeys() {
  static const std::set<std::string> keys = {
      "model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
      "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
      "reorder_and_upcast_attn", "num_mem_tokens", "d_mem", "segment_size", "segment_alignment", "wrap_pos",
      "correction", "memory_insertion", "generate_policy", "use_denom", "gating", "use_sink", "sliding_window",
      "head_dim", "feat_dim", "architectures", "torch_dtype", "transformers_version", "_name_or_path", "n_ctx",
      "resid_pdrop", "embd_pdrop", "attn_pdrop", "initializer_range", "use_cache", "bos_token_id", "eos_token_id",
      "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
      "task_specific_params"};
  return keys;
}

absl::Status CheckKeys(const ConfigReader& r) {
  for (const auto& [key, value] : r.object().items()) {
    if (key == "memory_caching") {
      return absl::UnimplementedError(absl::StrCat(
          r.source(), ": armt: \"memory_caching\" is not supported (ARMT's memory is written once per segment; "
                      "Memory Caching does not apply to it)"));
    }
    if (!ArmtKeys().contains(key)) return r.Error(absl::StrCat("armt: \"", key, "\" is not an armt config field"));
  }
  return absl::OkStatus();
}

// An integer ≥ 1; absent or null → def (def < 0: required).
absl::StatusOr<int64_t> PositiveInt(const ConfigReader& r, const char* key, int64_t def) {
  if (def < 0 && !r.HasValue(key)) return r.Error(absl::StrCat("armt: \"", key, "\" is required"));
  MCSERVE_ASSIGN_OR_RETURN(int64_t v, r.Int(key, def, /*null_is_default=*/true));
  if (v < 1) return r.Error(absl::StrCat("armt: \"", key, "\" must be an integer >= 1, got ", v));
  return v;
}

// A bool that only `only` is implemented for; absent or null → fine.
absl::Status OnlyBool(const ConfigReader& r, const char* key, bool only) {
  if (!r.HasValue(key)) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(bool v, r.Bool(key, only));
  if (v != only) return r.Error(absl::StrCat("armt: \"", key, "\" is only supported as ", only ? "true" : "false"));
  return absl::OkStatus();
}

// The fields with one implemented value (GPT-2's and the later code variants).
absl::Status ReadFixedFields(const ConfigReader& r) {
  MCSERVE_RETURN_IF_ERROR(Choice(r, "activation_function", {"gelu_new"}).status());
  MCSERVE_RETURN_IF_ERROR(Choice(r, "segment_alignment", {"left"}).status());
  MCSERVE_RETURN_IF_ERROR(Choice(r, "memory_insertion", {"parallel"}).status());
  MCSERVE_ASSIGN_OR_RETURN(int policy, Choice(r, "generate_policy", {"streaming", "reference_generate"}));
  if (policy != 0) {
    return absl::UnimplementedError(absl::StrCat(
        r.source(), ": armt: \"generate_policy\": only \"streaming\" is served (segments close whenever full); "
                    "\"reference_generate\" is reference only"));
  }
  for (const char* key : {"tie_word_embeddings", "scale_attn_weights", "use_denom"}) {
    MCSERVE_RETURN_IF_ERROR(OnlyBool(r, key, true));
  }
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "gating", "use_sink", "sliding_window"}) {
    MCSERVE_RETURN_IF_ERROR(OnlyBool(r, key, false));
  }
  return r.Bool("reorder_and_upcast_attn", false).status();  // numerics only
}

// A derived field, accepted only with its derived value.
absl::Status CheckDerived(const ConfigReader& r, const char* key, int64_t value) {
  if (!r.HasValue(key)) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(int64_t v, r.Int(key, value));
  if (v != value) return r.Error(absl::StrCat("armt: \"", key, "\" is derived (", value, " here), got ", v));
  return absl::OkStatus();
}

// The ARMT memory fields and the segment/position-table limit.
absl::Status ReadMemoryFields(const ConfigReader& r, ModelConfig& c) {
  ArmtConfig& a = c.armt;
  MCSERVE_ASSIGN_OR_RETURN(a.num_mem_tokens, PositiveInt(r, "num_mem_tokens", -1));
  MCSERVE_ASSIGN_OR_RETURN(a.d_mem, PositiveInt(r, "d_mem", -1));
  MCSERVE_ASSIGN_OR_RETURN(a.segment_size, PositiveInt(r, "segment_size", -1));
  a.feat_dim = 6 * a.d_mem;
  if (r.HasValue("wrap_pos")) {
    MCSERVE_ASSIGN_OR_RETURN(bool wrap, r.Bool("wrap_pos", false));
    a.wrap_pos = wrap;
  }
  MCSERVE_ASSIGN_OR_RETURN(a.correction, r.HasValue("correction") ? r.Bool("correction", true) : true);
  const int64_t need = a.segment_size + (a.wrap_pos.value_or(false) ? 0 : a.num_mem_tokens);
  if (need > a.n_positions) {
    return r.Error(absl::StrCat("armt: \"segment_size\" + num_mem_tokens must be <= n_positions (", a.n_positions,
                                ") (positions restart every segment), got ", a.segment_size));
  }
  MCSERVE_RETURN_IF_ERROR(CheckDerived(r, "head_dim", a.head_dim));
  return CheckDerived(r, "feat_dim", a.feat_dim);
}

}  // namespace

absl::Status ReadArmtConfig(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_RETURN_IF_ERROR(CheckKeys(r));
  ArmtConfig& a = c.armt;
  MCSERVE_ASSIGN_OR_RETURN(c.vocab_size, PositiveInt(r, "vocab_size", 50257));
  MCSERVE_ASSIGN_OR_RETURN(a.n_positions, PositiveInt(r, "n_positions", 1024));
  MCSERVE_ASSIGN_OR_RETURN(c.hidden_size, PositiveInt(r, "n_embd", 768));
  MCSERVE_ASSIGN_OR_RETURN(c.num_hidden_layers, PositiveInt(r, "n_layer", 12));
  MCSERVE_ASSIGN_OR_RETURN(a.num_heads, PositiveInt(r, "n_head", 12));
  MCSERVE_ASSIGN_OR_RETURN(c.intermediate_size, PositiveInt(r, "n_inner", 4 * c.hidden_size));
  if (c.hidden_size % a.num_heads != 0) {
    return r.Error(absl::StrCat("armt: \"n_head\" must divide n_embd (", c.hidden_size, "), got ", a.num_heads));
  }
  a.head_dim = c.hidden_size / a.num_heads;
  MCSERVE_ASSIGN_OR_RETURN(double eps, r.Float("layer_norm_epsilon", 1e-5, /*null_is_default=*/true));
  if (!(eps > 0)) return r.Error(absl::StrCat("armt: \"layer_norm_epsilon\" must be a number > 0, got ", eps));
  c.norm_eps = static_cast<float>(eps);
  MCSERVE_RETURN_IF_ERROR(ReadFixedFields(r));
  MCSERVE_RETURN_IF_ERROR(ReadMemoryFields(r, c));
  c.tie_word_embeddings = true;
  c.use_short_conv = false;
  c.num_heads = a.num_heads;
  return absl::OkStatus();
}

}  // namespace mcserve::engine
