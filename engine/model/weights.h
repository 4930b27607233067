// WeightStore: the named tensors of a model directory, mmapped from `model.safetensors` or from the
// shards listed in `model.safetensors.index.json`. Tensors are read-only host views (no copy).
// Thread-safe after Open (immutable).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class WeightStore {
 public:
  // Opens and fully validates every weight file of `dir` (offsets, lengths, overlaps, dtypes,
  // index consistency). Errors name the file and the problem.
  static absl::StatusOr<std::shared_ptr<const WeightStore>> Open(const std::string& dir);

  bool Has(std::string_view name) const;
  // The tensor `name`; NotFound naming the tensor and the directory if absent.
  absl::StatusOr<kernels::Tensor> Get(std::string_view name) const;
  // As Get, and InvalidArgument (naming the file, tensor, expected and actual shapes) unless the
  // stored shape equals `shape`.
  absl::StatusOr<kernels::Tensor> Get(std::string_view name, const kernels::Shape& shape) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  // The file that holds `name` (for error messages); empty if absent.
  std::string FileOf(std::string_view name) const;
  // Drops the files' resident pages once the weights were copied out of them (the CPU's HostArena), so
  // a model's weights are not resident twice; any later Get still reads them, from the file.
  void DropResidentPages() const;

  struct Impl;
  explicit WeightStore(std::unique_ptr<Impl> impl);
  ~WeightStore();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcserve::engine
