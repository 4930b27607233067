// safetensors reader: header parsing and validation (pure, fuzzable) separated from the mmapped
// file (specs/checkpoints.md §4.1). Only F32, F16, BF16 and I32 tensors are accepted.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// Largest JSON header accepted (safetensors' MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeaderSize = 100'000'000;

// One tensor of a safetensors file. Offsets are relative to the start of the data section.
struct SafetensorsEntry {
  std::string name;
  kernels::DType dtype = kernels::DType::kF32;
  kernels::Shape shape;  // any rank, including 0
  uint64_t begin = 0;    // first byte
  uint64_t end = 0;      // one past the last byte
};

// A validated file layout: entries sorted by name, and where the data section starts.
struct SafetensorsLayout {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;  // `__metadata__`
  uint64_t data_offset = 0;  // = 8 + header length
  uint64_t data_size = 0;
};

// Parses and validates the JSON header (the N bytes after the length prefix) against a data section
// of `data_section_size` bytes: dtypes, shapes, offsets, byte lengths, no overlap, no hole, no
// duplicate names. Entries come back sorted by name. `source` names the file in error messages.
// Any thread.
absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(
    std::string_view header_bytes, uint64_t data_section_size, const std::string& source);

// As ParseSafetensorsHeader, also returning `__metadata__`.
absl::StatusOr<SafetensorsLayout> ParseSafetensorsHeaderWithMetadata(
    std::string_view header_bytes, uint64_t data_section_size, const std::string& source);

// Validates a whole file image (u64 length prefix, header, data section). Any thread.
absl::StatusOr<SafetensorsLayout> ParseSafetensorsImage(std::string_view image, const std::string& source);

// A read-only, MAP_PRIVATE mmap of a validated safetensors file. Immutable; any thread.
class SafetensorsFile {
 public:
  // Maps and validates `path`; errors name the path and the problem.
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsLayout& layout() const { return layout_; }
  const std::vector<SafetensorsEntry>& entries() const { return layout_.entries; }
  // The entry `name`, or nullptr.
  const SafetensorsEntry* Find(std::string_view name) const;
  // Address of the entry's first byte inside the mapping (valid while this object lives).
  const uint8_t* DataOf(const SafetensorsEntry& entry) const;
  // Drops the mapping's resident pages (madvise MADV_DONTNEED) once their contents were copied
  // elsewhere; a later read faults them in from the file again, so every view stays valid.
  void DropResidentPages() const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* base_ = nullptr;  // mapping start (page aligned)
  size_t size_ = 0;
  SafetensorsLayout layout_;
};

}  // namespace mcserve::engine
