// Row selection shared by the memory rules (memory_rule.h).
#include "engine/mc/memory_rule.h"

#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::StatusOr<const Tensor*> SelectRows(const Context& ctx, const Tensor* t, std::span<const int32_t> rows,
                                         kernels::TensorList& keep) {
  if (t == nullptr) return nullptr;
  bool consecutive = true;
  for (size_t i = 1; i < rows.size() && consecutive; ++i) consecutive = rows[i] == rows[i - 1] + 1;
  if (consecutive && !rows.empty()) {
    keep.push_back(t->Rows(rows.front(), rows.back() + 1));
  } else {
    MCSERVE_ASSIGN_OR_RETURN(Tensor gathered, GatherRows(ctx, *t, rows));
    keep.push_back(std::move(gathered));
  }
  return &keep.back();
}

absl::Status SelectRowsOf(const Context& ctx, std::span<const int32_t> rows,
                          std::initializer_list<const Tensor**> fields, kernels::TensorList& keep) {
  keep.clear();
  keep.reserve(fields.size());  // no reallocation below: the fields point into it
  for (const Tensor** field : fields) {
    MCSERVE_ASSIGN_OR_RETURN(*field, SelectRows(ctx, *field, rows, keep));
  }
  return absl::OkStatus();
}

RowList RowRange(int64_t begin, int64_t end) {
  RowList rows(static_cast<size_t>(end - begin));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(begin + static_cast<int64_t>(i));
  return rows;
}

}  // namespace mcserve::engine
