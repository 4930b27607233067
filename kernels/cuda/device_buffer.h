// DeviceBuffer: scoped device memory from a DeviceRuntime (kernel scratch, pointer tables), returned
// to the runtime's cache when the guard goes out of scope. Used by the op `_cuda.cu` sources under
// nvcc and under the emulator alike. The thread that owns the guard.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::kernels {

class DeviceBuffer {
 public:
  explicit DeviceBuffer(DeviceRuntime* rt) : rt_(rt) {}
  ~DeviceBuffer() {
    if (ptr_ != nullptr) rt_->Free(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Allocates `bytes` (freeing any earlier allocation of this guard); get() is null until then.
  absl::Status Allocate(size_t bytes) {
    if (ptr_ != nullptr) {
      rt_->Free(ptr_);
      ptr_ = nullptr;
    }
    auto p = rt_->Allocate(bytes);
    if (!p.ok()) return p.status();
    ptr_ = *p;
    return absl::OkStatus();
  }
  void* get() const { return ptr_; }

 private:
  DeviceRuntime* rt_;
  void* ptr_ = nullptr;
};

}  // namespace mcserve::kernels
