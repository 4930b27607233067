// Test helpers for the model-loading tests: safetensors file images (valid or deliberately broken),
// temp dirs, and a status matcher that checks the code and the message.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/model/safetensors.h"
#include "gtest/gtest.h"

namespace mcserve::engine::testing {

// A tensor to write: raw little-endian bytes.
struct TensorBytes {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string F32Bytes(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::string Bf16Bytes(const std::vector<uint16_t>& bits) {
  std::string out(bits.size() * 2, '\0');
  if (!bits.empty()) std::memcpy(out.data(), bits.data(), out.size());
  return out;
}

inline std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? "," : "", shape[i]);
  s += "]";
  return s;
}

// u64 little-endian length + header + data.
inline std::string FileImage(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  absl::StrAppend(&out, header, data);
  return out;
}

// A valid file: tensors laid out back to back in the given order; header padded with spaces to
// `pad_multiple` (8 + header length becomes a multiple of it; 1 = no padding).
inline std::string BuildSafetensors(const std::vector<TensorBytes>& tensors, size_t pad_multiple = 8,
                                    const std::string& metadata_json = "{\"format\":\"pt\"}") {
  // absl::StrAppend rather than `"literal" + std::string` chains (GCC 12 -Wrestrict false positive).
  std::string header = "{";
  if (!metadata_json.empty()) absl::StrAppend(&header, "\"__metadata__\":", metadata_json);
  std::string data;
  for (const TensorBytes& t : tensors) {
    if (header.size() > 1) header += ",";
    absl::StrAppend(&header, "\"", t.name, "\":{\"dtype\":\"", t.dtype, "\",\"shape\":", ShapeJson(t.shape),
                    ",\"data_offsets\":[", data.size(), ",", data.size() + t.bytes.size(), "]}");
    data += t.bytes;
  }
  header += "}";
  while ((8 + header.size()) % pad_multiple != 0) header += ' ';
  return FileImage(header, data);
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Writes float v as element i of the F32 tensor whose raw bytes start at `bytes` (unaligned-safe).
inline void PutF32(char* bytes, int64_t i, float v) { std::memcpy(bytes + i * sizeof(float), &v, sizeof v); }

// Copies every file of fixture directory `from` into `dir`, then runs patch(entry, bytes) on each
// tensor of model.safetensors (bytes: the tensor's first raw byte) and writes the file back.
inline void CopyFixturePatched(const std::string& from, const std::string& dir,
                               const std::function<void(const SafetensorsEntry&, char*)>& patch) {
  for (const auto& f : std::filesystem::directory_iterator(from)) {
    std::filesystem::copy_file(f.path(), dir + "/" + f.path().filename().string());
  }
  const std::string path = dir + "/model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  auto layout = ParseSafetensorsImage(image, path);
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const SafetensorsEntry& e : layout->entries) patch(e, image.data() + layout->data_offset + e.begin);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << image;
}

// A fresh directory removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string base = std::filesystem::temp_directory_path().string() + "/mcserve_test_XXXXXX";
    std::vector<char> buf(base.begin(), base.end());
    buf.push_back('\0');
    char* made = ::mkdtemp(buf.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Success iff `status` has `code` and its message contains every one of `parts`.
inline ::testing::AssertionResult HasError(const absl::Status& status, absl::StatusCode code,
                                           const std::vector<std::string>& parts) {
  if (status.code() != code) {
    return ::testing::AssertionFailure() << "expected code " << absl::StatusCodeToString(code) << ", got "
                                         << status.ToString();
  }
  for (const std::string& part : parts) {
    if (!absl::StrContains(status.message(), part)) {
      return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mcserve::engine::testing
