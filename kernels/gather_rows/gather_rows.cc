#include "kernels/gather_rows/gather_rows.h"

#include "absl/strings/str_cat.h"
#include "kernels/core/tensor_data.h"
#include "kernels/gather_rows/gather_rows_math.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const GatherRowsArgs& a) {
  if (a.table == nullptr || a.ids == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("GatherRows: table, ids and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(
      CheckOnDevice("GatherRows", ctx.device, {{"table", a.table}, {"ids", a.ids}, {"out", a.out}}));
  const Tensor &table = *a.table, &ids = *a.ids, &out = *a.out;
  if (table.dtype() == DType::kI32 || table.rank() != 2 || ids.dtype() != DType::kI32 || ids.rank() != 1 ||
      out.dtype() != DType::kF32 || out.rank() != 2 || out.dim(0) != ids.dim(0) || out.dim(1) != table.dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GatherRows: table ", table.DebugString(), ", ids ", ids.DebugString(), ", out ", out.DebugString(),
        " (want table F32|BF16|F16 [vocab, H], ids I32 [m], out F32 [m, H])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("GatherRows", "out", out));
  if (ids.device() == Device::kCpu) {  // device-resident ids are checked by the device kernel
    const int32_t* id = Data<int32_t>(ids);
    const int64_t vocab = table.dim(0);
    for (int64_t i = 0; i < ids.dim(0); ++i) {
      if (!gather_rows_math::IdInRange(id[i], vocab)) {
        return absl::InvalidArgumentError(
            absl::StrCat("GatherRows: row id ", id[i], " at position ", i, " outside [0, ", vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GatherRows(const Context& ctx, const GatherRowsArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "GatherRows", &internal::GatherRowsCpu, MCSERVE_CUDA_FN(internal::cuda::GatherRowsCuda),
                    &internal::cuda_emu::GatherRowsCuda, args);
}

}  // namespace mcserve::kernels
