#include "kernels/delta_decode/delta_decode.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("DeltaDecode: ", msg)); }

// Whether `view` reads exactly the elements of `t` (the same data, the same count).
bool SameData(const Tensor& view, const Tensor& t) { return RawData(view) == RawData(t) && view.numel() == t.numel(); }

// The gates' logits [B, H] and the decay's parameters [H], and memory's beta and decay to write.
absl::Status ValidateGates(const Context& ctx, const DeltaDecodeArgs& a, int64_t seqs, int64_t heads) {
  const LinearMemoryArgs& m = a.memory;
  if (a.beta == nullptr || m.beta != a.beta || m.decay != a.decay) {
    return Bad("memory's beta and decay must be beta and decay");
  }
  if ((a.decay_logits != nullptr) != (a.decay != nullptr) ||
      (a.decay_logits != nullptr) != (a.a_log != nullptr && a.dt_bias != nullptr)) {
    return Bad("decay_logits, a_log, dt_bias and decay come together");
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("DeltaDecode", "beta", *a.beta));
  if (a.decay != nullptr) MCSERVE_RETURN_IF_ERROR(CheckWritable("DeltaDecode", "decay", *a.decay));
  const TensorSpec rows{DType::kF32, {seqs, heads}, "[B, H]"}, per_head{DType::kF32, {heads}, "[H]"};
  if (a.beta_logits != nullptr) {
    MCSERVE_RETURN_IF_ERROR(CheckArg("DeltaDecode", "beta_logits", *a.beta_logits, ctx.device, rows));
  }
  if (a.decay_logits != nullptr) {
    MCSERVE_RETURN_IF_ERROR(CheckArg("DeltaDecode", "decay_logits", *a.decay_logits, ctx.device, rows));
    MCSERVE_RETURN_IF_ERROR(CheckArg("DeltaDecode", "a_log", *a.a_log, ctx.device, per_head));
    MCSERVE_RETURN_IF_ERROR(CheckArg("DeltaDecode", "dt_bias", *a.dt_bias, ctx.device, per_head));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const DeltaDecodeArgs& a) {
  if (ctx.device != Device::kCpu) return absl::UnimplementedError("DeltaDecode: CPU only (run the ops one by one)");
  const LinearMemoryArgs& m = a.memory;
  MCSERVE_RETURN_IF_ERROR(ValidateLinearMemory(ctx, m));
  if (m.rule != LinearMemoryRule::kGatedDelta || m.key_decay != nullptr || m.gamma != nullptr || m.aux != nullptr) {
    return Bad("memory must be kGatedDelta (beta and decay: ValidateGates), without key_decay, gamma or aux");
  }
  const Tensor* rows[3] = {m.q, m.k, m.v};
  constexpr const char* kRowNames[3] = {"q", "k", "v"};
  const int64_t heads = m.state->dim(1), k = m.q->dim(2), v = m.v->dim(2);
  if (m.q->dim(1) != heads || m.k->dim(1) != heads || m.v->dim(1) != heads) {
    return Bad(absl::StrCat("q, k and v heads ", m.q->dim(1), ", ", m.k->dim(1), ", ", m.v->dim(1),
                            " must equal the state's ", heads));
  }
  // A head's channels start on a multiple of 8, where ShortConv's SiLU takes its 8 lanes: the same bits.
  if (k % 8 != 0 || v % 8 != 0) return Bad(absl::StrCat("K ", k, " and V ", v, " must be multiples of 8"));
  for (int i = 0; i < 3; ++i) {
    const ShortConvArgs& c = a.conv[i];
    MCSERVE_RETURN_IF_ERROR(ValidateShortConv(ctx, c));
    if (!c.silu || c.bias != nullptr) return Bad(absl::StrCat("conv[", i, "] must apply SiLU, without bias"));
    const int64_t d = c.x->dim(1), width = c.weight->dim(2);
    if (a.taps[i] == nullptr) return Bad(absl::StrCat("taps[", i, "] is required"));
    MCSERVE_RETURN_IF_ERROR(CheckArg("DeltaDecode", absl::StrCat("taps[", i, "]").c_str(), *a.taps[i], ctx.device,
                                     {DType::kF32, {width, d}, "[W, D]"}));
    if (c.layout.cu_seqlens != m.layout.cu_seqlens || c.layout.slot_ids != m.layout.slot_ids) {
      return Bad(absl::StrCat("conv[", i, "] and memory must share one batch layout"));
    }
    if (!SameData(*rows[i], *c.out)) return Bad(absl::StrCat("memory's ", kRowNames[i], " must be conv[", i, "].out"));
  }
  const int64_t seqs = m.layout.slot_ids->dim(0);
  MCSERVE_RETURN_IF_ERROR(ValidateGates(ctx, a, seqs, heads));
  const int32_t* cu = Data<int32_t>(*m.layout.cu_seqlens);
  for (int64_t b = 0; b <= seqs; ++b) {
    if (cu[b] != b) return Bad("one token per sequence (cu_seqlens 0, 1, ..., B)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeltaDecode(const Context& ctx, const DeltaDecodeArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return internal::DeltaDecodeCpu(ctx, args);
}

}  // namespace mcserve::kernels
