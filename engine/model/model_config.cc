#include "engine/model/model_config.h"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "engine/model/config_reader.h"
#include "engine/model/read_armt_config.h"
#include "engine/model/read_gam_config.h"
#include "engine/model/read_hope_config.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {
namespace {

using nlohmann::json;

constexpr const char* kSupportedTypes = "linear_attn, gla, delta_net, gated_deltanet, swla, titans, dla, lattice, hope, gam, armt";

absl::StatusOr<ModelFamily> FamilyOf(const std::string& type, const ConfigReader& r) {
  if (type == "linear_attn") return ModelFamily::kLinearAttn;
  if (type == "gla") return ModelFamily::kGla;
  if (type == "delta_net") return ModelFamily::kDeltaNet;
  if (type == "gated_deltanet") return ModelFamily::kGatedDeltaNet;
  if (type == "swla") return ModelFamily::kSwla;
  if (type == "titans") return ModelFamily::kTitans;
  if (type == "dla") return ModelFamily::kDla;
  if (type == "lattice") return ModelFamily::kLattice;
  if (type == "hope") return ModelFamily::kHope;
  if (type == "gam") return ModelFamily::kGam;
  if (type == "armt") return ModelFamily::kArmt;
  return r.Error(absl::StrCat("unsupported model_type \"", type, "\" (supported: ", kSupportedTypes, ")"));
}

// Python's int(a · b) for a positive product.
int64_t IntProduct(int64_t a, double b) { return static_cast<int64_t>(static_cast<double>(a) * b); }

absl::Status ReadShared(const ConfigReader& r, ModelConfig& c) {
  const int64_t default_layers = c.family == ModelFamily::kGatedDeltaNet ? 21 : 24;
  MCSERVE_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", 32000));
  MCSERVE_ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", 2048));
  MCSERVE_ASSIGN_OR_RETURN(c.num_hidden_layers, r.Int("num_hidden_layers", default_layers));
  MCSERVE_RETURN_IF_ERROR(r.Positive("vocab_size", c.vocab_size));
  MCSERVE_RETURN_IF_ERROR(r.Positive("hidden_size", c.hidden_size));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_hidden_layers", c.num_hidden_layers));

  MCSERVE_ASSIGN_OR_RETURN(double hidden_ratio, r.Float("hidden_ratio", 4.0, /*null_is_default=*/true));
  MCSERVE_RETURN_IF_ERROR(r.Positive("hidden_ratio", hidden_ratio));
  if (r.HasValue("intermediate_size")) {
    MCSERVE_ASSIGN_OR_RETURN(c.intermediate_size, r.Int("intermediate_size", 0));
    MCSERVE_RETURN_IF_ERROR(r.Positive("intermediate_size", c.intermediate_size));
  } else {
    // fla GatedMLP: int(H · hidden_ratio · 2 / 3), rounded up to a multiple of 256.
    const int64_t raw = static_cast<int64_t>(static_cast<double>(c.hidden_size) * hidden_ratio * 2 / 3);
    c.intermediate_size = 256 * ((raw + 255) / 256);
    MCSERVE_RETURN_IF_ERROR(r.Positive("intermediate_size (from hidden_ratio)", c.intermediate_size));
  }

  // norm_eps, else the legacy rms_norm_eps.
  const char* eps_key = r.HasValue("norm_eps") || !r.HasValue("rms_norm_eps") ? "norm_eps" : "rms_norm_eps";
  MCSERVE_ASSIGN_OR_RETURN(double eps, r.Float(eps_key, 1e-6));
  MCSERVE_RETURN_IF_ERROR(r.Positive(eps_key, eps));
  c.norm_eps = static_cast<float>(eps);

  MCSERVE_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  MCSERVE_ASSIGN_OR_RETURN(c.bos_token_id, r.TokenId("bos_token_id", 1));
  MCSERVE_ASSIGN_OR_RETURN(c.eos_token_id, r.TokenId("eos_token_id", 2));
  for (auto [key, id] : {std::pair{"bos_token_id", c.bos_token_id}, std::pair{"eos_token_id", c.eos_token_id}}) {
    if (id < 0 || id >= c.vocab_size) {
      return r.Error(absl::StrCat("\"", key, "\" ", id, " is outside the vocabulary [0, ", c.vocab_size, ")"));
    }
  }
  MCSERVE_ASSIGN_OR_RETURN(auto act, r.OptString("hidden_act"));
  if (act && *act != "swish" && *act != "silu") {
    return r.Error(absl::StrCat("\"hidden_act\" \"", *act, "\" is not supported (only swish/silu)"));
  }
  return absl::OkStatus();
}

// linear_attn / gla: key_dim = int(H·expand_k), value_dim = int(H·expand_v), grouped k/v heads.
// fla's key_dim = int(H·expand_k), value_dim = int(H·expand_v), split evenly over num_heads.
absl::Status ResolveExpandedDims(const ConfigReader& r, double expand_k, double expand_v, ModelConfig& c) {
  c.key_dim = IntProduct(c.hidden_size, expand_k);
  c.value_dim = IntProduct(c.hidden_size, expand_v);
  if (c.key_dim <= 0 || c.key_dim % c.num_heads != 0) {
    return r.Error(absl::StrCat("key_dim = int(hidden_size·expand_k) = ", c.key_dim,
                                " must be a positive multiple of num_heads ", c.num_heads));
  }
  if (c.value_dim <= 0 || c.value_dim % c.num_heads != 0) {
    return r.Error(absl::StrCat("value_dim = int(hidden_size·expand_v) = ", c.value_dim,
                                " must be a positive multiple of num_heads ", c.num_heads));
  }
  c.head_k_dim = c.key_dim / c.num_heads;
  c.head_v_dim = c.value_dim / c.num_heads;
  return absl::OkStatus();
}

absl::Status ReadGroupedDims(const ConfigReader& r, ModelConfig& c, double default_expand_k,
                             int64_t default_heads) {
  MCSERVE_ASSIGN_OR_RETURN(double expand_k, r.Float("expand_k", default_expand_k));
  MCSERVE_ASSIGN_OR_RETURN(double expand_v, r.Float("expand_v", 1.0));
  MCSERVE_RETURN_IF_ERROR(r.Positive("expand_k", expand_k));
  MCSERVE_RETURN_IF_ERROR(r.Positive("expand_v", expand_v));
  MCSERVE_ASSIGN_OR_RETURN(c.num_heads, r.Int("num_heads", default_heads));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_heads", c.num_heads));
  MCSERVE_ASSIGN_OR_RETURN(c.num_kv_heads, r.Int("num_kv_heads", c.num_heads, /*null_is_default=*/true));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_kv_heads", c.num_kv_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error(absl::StrCat("\"num_kv_heads\" ", c.num_kv_heads, " must divide \"num_heads\" ", c.num_heads));
  }
  c.num_v_heads = c.num_heads;  // v heads after repeating over groups
  MCSERVE_RETURN_IF_ERROR(ResolveExpandedDims(r, expand_k, expand_v, c));
  return absl::OkStatus();
}

absl::Status ReadLinearAttn(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_RETURN_IF_ERROR(ReadGroupedDims(r, c, /*default_expand_k=*/1.0, /*default_heads=*/4));
  MCSERVE_ASSIGN_OR_RETURN(auto fm, r.OptString("feature_map"));
  const std::string name = fm.value_or("elementwise_product");
  static const std::pair<const char*, FeatureMapType> kMaps[] = {
      {"elementwise_product", FeatureMapType::kHadamard}, {"hedgehog", FeatureMapType::kHedgehog},
      {"t2r", FeatureMapType::kT2R}, {"dpfp", FeatureMapType::kDpfp}, {"elu", FeatureMapType::kElu},
      {"relu", FeatureMapType::kRelu}, {"identity", FeatureMapType::kIdentity}};
  bool found = false;
  for (const auto& [key, type] : kMaps) {
    if (name == key) {
      c.feature_map = type;
      found = true;
    }
  }
  if (!found) {
    return r.Error(absl::StrCat("\"feature_map\" \"", name,
                                "\" is not supported (elementwise_product, hedgehog, t2r, dpfp, elu, relu, identity)"));
  }
  MCSERVE_ASSIGN_OR_RETURN(c.tie_feature_map_qk, r.Bool("tie_feature_map_qk", false));
  MCSERVE_ASSIGN_OR_RETURN(c.norm_q, r.Bool("norm_q", false));
  MCSERVE_ASSIGN_OR_RETURN(c.norm_k, r.Bool("norm_k", false));
  MCSERVE_ASSIGN_OR_RETURN(c.norm_feature_map, r.Bool("norm_feature_map", false));
  c.use_short_conv = false;
  c.use_gate = false;
  return absl::OkStatus();
}

absl::Status ReadGla(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_RETURN_IF_ERROR(ReadGroupedDims(r, c, /*default_expand_k=*/0.5, /*default_heads=*/4));
  MCSERVE_ASSIGN_OR_RETURN(auto fm, r.OptString("feature_map"));
  if (!fm || *fm == "identity") {
    c.feature_map = FeatureMapType::kIdentity;
  } else if (*fm == "relu") {
    c.feature_map = FeatureMapType::kRelu;
  } else if (*fm == "elu") {
    c.feature_map = FeatureMapType::kElu;
  } else if (*fm == "silu" || *fm == "swish") {
    c.feature_map = FeatureMapType::kSilu;
  } else {
    return r.Error(absl::StrCat("\"feature_map\" \"", *fm, "\" is not supported for gla (null, identity, relu, elu, silu)"));
  }
  MCSERVE_ASSIGN_OR_RETURN(c.use_short_conv, r.Bool("use_short_conv", false));
  MCSERVE_ASSIGN_OR_RETURN(c.conv_size, r.Int("conv_size", 4));
  MCSERVE_ASSIGN_OR_RETURN(c.use_output_gate, r.Bool("use_output_gate", true));
  c.use_gate = false;
  if (r.HasValue("clamp_min")) {
    MCSERVE_ASSIGN_OR_RETURN(double clamp, r.Float("clamp_min", 0.0));
    c.clamp_min = static_cast<float>(clamp);
  } else {
    c.clamp_min.reset();
  }
  c.gate_low_rank_dim = 16;  // hard-coded in fla's GatedLinearAttention
  c.gate_logit_normalizer = 16.0f;
  return absl::OkStatus();
}

absl::Status ReadDeltaNet(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_ASSIGN_OR_RETURN(double expand_k, r.Float("expand_k", 1.0));
  MCSERVE_ASSIGN_OR_RETURN(double expand_v, r.Float("expand_v", 1.0));
  MCSERVE_RETURN_IF_ERROR(r.Positive("expand_k", expand_k));
  MCSERVE_RETURN_IF_ERROR(r.Positive("expand_v", expand_v));
  MCSERVE_ASSIGN_OR_RETURN(c.num_heads, r.Int("num_heads", 16));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_heads", c.num_heads));
  c.num_kv_heads = c.num_v_heads = c.num_heads;
  MCSERVE_RETURN_IF_ERROR(ResolveExpandedDims(r, expand_k, expand_v, c));
  MCSERVE_ASSIGN_OR_RETURN(c.use_gate, r.Bool("use_gate", false));
  MCSERVE_ASSIGN_OR_RETURN(c.use_short_conv, r.Bool("use_short_conv", true));
  MCSERVE_ASSIGN_OR_RETURN(c.conv_size, r.Int("conv_size", 4));
  MCSERVE_ASSIGN_OR_RETURN(c.use_beta, r.Bool("use_beta", true));
  MCSERVE_ASSIGN_OR_RETURN(c.allow_neg_eigval, r.Bool("allow_neg_eigval", false));
  MCSERVE_ASSIGN_OR_RETURN(auto act, r.OptString("qk_activation"));
  const std::string a = act.value_or("silu");
  if (a == "silu") {
    c.qk_activation = FeatureMapType::kSilu;
  } else if (a == "relu") {
    c.qk_activation = FeatureMapType::kRelu;
  } else if (a == "elu") {
    c.qk_activation = FeatureMapType::kElu;
  } else if (a == "identity") {
    c.qk_activation = FeatureMapType::kIdentity;
  } else {
    return r.Error(absl::StrCat("\"qk_activation\" \"", a, "\" is not supported (silu, relu, elu, identity)"));
  }
  MCSERVE_ASSIGN_OR_RETURN(auto norm, r.OptString("qk_norm"));
  const std::string n = norm.value_or("l2");
  if (n == "l2") {
    c.qk_norm = QkNorm::kL2;
  } else if (n == "sum") {
    c.qk_norm = QkNorm::kSum;
  } else {
    return r.Error(absl::StrCat("\"qk_norm\" \"", n, "\" is not supported (l2, sum)"));
  }
  return absl::OkStatus();
}

// titans' memory_depth (1: matrix, 2: MLP) and dla's (always the MLP), then the MLP memory's fields.
absl::Status ReadMemoryDepth(const ConfigReader& r, ModelConfig& c) {
  const bool dla = c.family == ModelFamily::kDla;
  MCSERVE_ASSIGN_OR_RETURN(c.memory_depth, r.Int("memory_depth", dla ? 2 : 1, /*null_is_default=*/true));
  if (dla && c.memory_depth != 2) {
    return r.Error(absl::StrCat("dla: the memory is always the 2-layer MLP (\"memory_depth\" 2), got ",
                                c.memory_depth));
  }
  if (c.memory_depth != 1 && c.memory_depth != 2) {
    return r.Error(absl::StrCat("titans: \"memory_depth\" must be 1 (matrix memory) or 2 (MLP memory), got ",
                                c.memory_depth));
  }
  if (c.memory_depth == 1) return absl::OkStatus();
  if (c.head_v_dim != c.head_k_dim) {
    return r.Error(absl::StrCat("the MLP memory maps head_dim to head_dim, so head_v = head_dim·expand_v (",
                                c.head_v_dim, ") must equal head_dim (", c.head_k_dim, "); set expand_v to 1"));
  }
  MCSERVE_ASSIGN_OR_RETURN(c.memory_expansion, r.Int("memory_expansion", 4, /*null_is_default=*/true));
  MCSERVE_RETURN_IF_ERROR(r.Positive("memory_expansion", static_cast<double>(c.memory_expansion)));
  MCSERVE_ASSIGN_OR_RETURN(c.inner_chunk_size, r.Int("inner_chunk_size", 1, /*null_is_default=*/true));
  MCSERVE_RETURN_IF_ERROR(r.Positive("inner_chunk_size", static_cast<double>(c.inner_chunk_size)));
  MCSERVE_ASSIGN_OR_RETURN(c.memory_layer_norm, r.Bool("memory_layer_norm", false));
  return absl::OkStatus();
}

// gated_deltanet, swla, titans, dla: head_k = head_dim, head_v = int(head_dim·expand_v).
absl::Status ReadHeadDimFamily(const ConfigReader& r, ModelConfig& c) {
  const bool gdn = c.family == ModelFamily::kGatedDeltaNet;
  MCSERVE_ASSIGN_OR_RETURN(c.num_heads, r.Int("num_heads", 6));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_heads", c.num_heads));
  MCSERVE_ASSIGN_OR_RETURN(int64_t head_dim, r.Int("head_dim", 256));
  MCSERVE_RETURN_IF_ERROR(r.Positive("head_dim", head_dim));
  MCSERVE_ASSIGN_OR_RETURN(double expand_v, r.Float("expand_v", gdn ? 2.0 : 1.0));
  MCSERVE_RETURN_IF_ERROR(r.Positive("expand_v", expand_v));
  c.num_kv_heads = c.num_heads;
  if (gdn) {
    MCSERVE_ASSIGN_OR_RETURN(c.num_v_heads, r.Int("num_v_heads", c.num_heads, /*null_is_default=*/true));
    MCSERVE_RETURN_IF_ERROR(r.Positive("num_v_heads", c.num_v_heads));
    if (c.num_v_heads % c.num_heads != 0) {
      return r.Error(absl::StrCat("\"num_v_heads\" ", c.num_v_heads, " must be a multiple of \"num_heads\" ",
                                  c.num_heads));
    }
  } else {
    c.num_v_heads = c.num_heads;
  }
  c.head_k_dim = head_dim;
  c.head_v_dim = IntProduct(head_dim, expand_v);
  if (c.head_v_dim <= 0 || std::abs(static_cast<double>(head_dim) * expand_v - c.head_v_dim) > 1e-5 * c.head_v_dim) {
    return r.Error(absl::StrCat("head_dim·expand_v = ", head_dim, "·", expand_v, " is not a positive integer"));
  }
  c.key_dim = c.num_heads * c.head_k_dim;
  c.value_dim = c.num_v_heads * c.head_v_dim;
  MCSERVE_ASSIGN_OR_RETURN(c.use_gate, r.Bool("use_gate", true));
  MCSERVE_ASSIGN_OR_RETURN(c.use_short_conv, r.Bool("use_short_conv", true));
  MCSERVE_ASSIGN_OR_RETURN(c.conv_size, r.Int("conv_size", 4));
  if (gdn) {
    MCSERVE_ASSIGN_OR_RETURN(c.allow_neg_eigval, r.Bool("allow_neg_eigval", false));
  }
  c.qk_activation = FeatureMapType::kSilu;
  c.qk_norm = QkNorm::kL2;
  if (c.family == ModelFamily::kTitans || c.family == ModelFamily::kDla) MCSERVE_RETURN_IF_ERROR(ReadMemoryDepth(r, c));
  return absl::OkStatus();
}

// lattice: d = head_dim (slot and value dim), m = num_slots (default d; the q/k dim), the A.9 fields.
absl::Status ReadLattice(const ConfigReader& r, ModelConfig& c) {
  MCSERVE_ASSIGN_OR_RETURN(c.num_heads, r.Int("num_heads", 6));
  MCSERVE_RETURN_IF_ERROR(r.Positive("num_heads", c.num_heads));
  MCSERVE_ASSIGN_OR_RETURN(c.head_v_dim, r.Int("head_dim", 64));
  MCSERVE_RETURN_IF_ERROR(r.Positive("head_dim", c.head_v_dim));
  MCSERVE_ASSIGN_OR_RETURN(c.head_k_dim, r.Int("num_slots", c.head_v_dim, /*null_is_default=*/true));
  if (c.head_k_dim < 1 || c.head_k_dim > c.head_v_dim) {
    return r.Error(absl::StrCat("\"num_slots\" ", c.head_k_dim, " must be in [1, head_dim = ", c.head_v_dim, "]"));
  }
  c.num_kv_heads = c.num_v_heads = c.num_heads;
  c.key_dim = c.num_heads * c.head_k_dim;
  c.value_dim = c.num_heads * c.head_v_dim;
  MCSERVE_ASSIGN_OR_RETURN(c.use_gate, r.Bool("use_gate", true));
  MCSERVE_ASSIGN_OR_RETURN(c.use_short_conv, r.Bool("use_short_conv", true));
  MCSERVE_ASSIGN_OR_RETURN(c.conv_size, r.Int("conv_size", 4));
  LatticeConfig& l = c.lattice;
  MCSERVE_ASSIGN_OR_RETURN(int variant, Choice(r, "lattice_variant", {"dec", "enc", "sim"}));
  l.variant = static_cast<LatticeVariant>(variant);
  MCSERVE_ASSIGN_OR_RETURN(int qk, Choice(r, "qk_projection", {"shared", "separate"}));
  l.shared_qk = qk == 0;
  MCSERVE_ASSIGN_OR_RETURN(int act, Choice(r, "conv_activation", {"none", "silu"}));
  l.conv_silu = act == 1;
  MCSERVE_ASSIGN_OR_RETURN(int norm, Choice(r, "qk_norm", {"none", "l2"}));
  l.qk_l2 = norm == 1;
  MCSERVE_ASSIGN_OR_RETURN(l.use_forget_gate, r.Bool("use_forget_gate", true));
  MCSERVE_ASSIGN_OR_RETURN(l.use_output_norm, r.Bool("use_output_norm", false));
  MCSERVE_ASSIGN_OR_RETURN(int init, Choice(r, "initial_state", {"auto", "learned", "identity"}));
  l.initial_state = static_cast<LatticeInit>(init);
  MCSERVE_ASSIGN_OR_RETURN(int renorm, Choice(r, "state_renorm", {"recompute", "analytic"}));
  l.analytic_renorm = renorm == 1;
  MCSERVE_ASSIGN_OR_RETURN(int readout, Choice(r, "readout", {"state", "normalized"}));
  l.normalized_readout = readout == 1;
  MCSERVE_ASSIGN_OR_RETURN(double threshold, r.Float("state_soft_threshold", 0.0, /*null_is_default=*/true));
  if (threshold != 0.0) {
    return r.Error("\"state_soft_threshold\" (the l1/ISTA variant) is not supported; it must be 0");
  }
  c.qk_norm = l.qk_l2 ? QkNorm::kL2 : QkNorm::kNone;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": must be a JSON object, got ", j.type_name()));
  }
  ConfigReader r(j, source);

  // gam keeps its published code's field names (n_embed, n_layer): its own strict reader.
  if (r.HasValue("model_type") && j.at("model_type") == "gam") {
    ModelConfig c;
    c.model_type = "gam";
    c.family = ModelFamily::kGam;
    MCSERVE_RETURN_IF_ERROR(ReadGamConfig(r, c));
    return c;
  }
  // armt keeps HF GPT-2's and the official ARMT code's field names: its own strict reader.
  if (r.HasValue("model_type") && j.at("model_type") == "armt") {
    ModelConfig c;
    c.model_type = "armt";
    c.family = ModelFamily::kArmt;
    MCSERVE_RETURN_IF_ERROR(ReadArmtConfig(r, c));
    return c;
  }
  // Old, non-fla schemas that reuse a model_type (e.g. bailin28/gla-1B-100B).
  if (!r.Has("hidden_size")) {
    for (const char* legacy : {"d_model", "n_head", "n_layer", "n_embd"}) {
      if (r.Has(legacy)) {
        return r.Error(absl::StrCat("has \"", legacy,
                                    "\" but no \"hidden_size\": this is not an fla-format config "
                                    "(mcserve reads fla's hidden_size/num_heads/num_hidden_layers schema)"));
      }
    }
  }

  MCSERVE_ASSIGN_OR_RETURN(auto type, r.OptString("model_type"));
  if (!type) return r.Error(absl::StrCat("missing \"model_type\" (supported: ", kSupportedTypes, ")"));
  ModelConfig c;
  c.model_type = *type;
  MCSERVE_ASSIGN_OR_RETURN(c.family, FamilyOf(*type, r));

  if (r.HasValue("attn")) {
    return absl::UnimplementedError(absl::StrCat(
        source, ": hybrid attention layers are not supported (config has a non-null \"attn\")"));
  }
  if (r.HasValue("attnres_block_size")) {
    return absl::UnimplementedError(absl::StrCat(
        source, ": hybrid attention layers are not supported (config sets \"attnres_block_size\")"));
  }

  MCSERVE_RETURN_IF_ERROR(ReadShared(r, c));
  if (r.Has("memory_caching")) {
    MCSERVE_ASSIGN_OR_RETURN(c.memory_caching, ParseMcConfig(j.at("memory_caching").dump(), source));
  }
  switch (c.family) {
    case ModelFamily::kLinearAttn: MCSERVE_RETURN_IF_ERROR(ReadLinearAttn(r, c)); break;
    case ModelFamily::kGla: MCSERVE_RETURN_IF_ERROR(ReadGla(r, c)); break;
    case ModelFamily::kDeltaNet: MCSERVE_RETURN_IF_ERROR(ReadDeltaNet(r, c)); break;
    case ModelFamily::kGatedDeltaNet:
    case ModelFamily::kSwla:
    case ModelFamily::kTitans:
    case ModelFamily::kDla: MCSERVE_RETURN_IF_ERROR(ReadHeadDimFamily(r, c)); break;
    case ModelFamily::kLattice: MCSERVE_RETURN_IF_ERROR(ReadLattice(r, c)); break;
    case ModelFamily::kHope: MCSERVE_RETURN_IF_ERROR(ReadHopeConfig(r, c)); break;
    case ModelFamily::kGam:
    case ModelFamily::kArmt: break;  // read above
  }
  if (c.use_short_conv) MCSERVE_RETURN_IF_ERROR(r.Positive("conv_size", c.conv_size));
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = dir.empty() || dir.back() == '/' ? dir + "config.json" : dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read model config ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("error reading ", path));
  return ParseModelConfig(ss.str(), path);
}

}  // namespace mcserve::engine
