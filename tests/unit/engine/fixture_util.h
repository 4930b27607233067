// Test helpers: the committed reference fixtures (tests/data/models/<name>/) and their goldens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "gtest/gtest.h"

namespace mcserve::testing {

// Names of every fixture directory, sorted.
inline std::vector<std::string> FixtureNames() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MCSERVE_TEST_DATA_DIR) + "/models")) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string FixtureDir(const std::string& name) {
  return std::string(MCSERVE_TEST_DATA_DIR) + "/models/" + name;
}

// golden.safetensors: the reference's prompt, full-prompt logits and greedy continuation.
struct Golden {
  std::vector<int32_t> prompt_ids;  // [T]
  std::vector<float> logits;        // [T, vocab]
  std::vector<int32_t> greedy_ids;  // [N]
  int64_t vocab = 0;
};

template <typename T>
std::vector<T> ReadEntry(const engine::SafetensorsFile& f, const std::string& name) {
  const engine::SafetensorsEntry* e = f.Find(name);
  if (e == nullptr) {
    ADD_FAILURE() << f.path() << " has no " << name;
    return {};
  }
  std::vector<T> out((e->end - e->begin) / sizeof(T));
  std::memcpy(out.data(), f.DataOf(*e), out.size() * sizeof(T));
  return out;
}

inline Golden LoadGolden(const std::string& name) {
  Golden g;
  auto file = engine::SafetensorsFile::Open(FixtureDir(name) + "/golden.safetensors");
  if (!file.ok()) {
    ADD_FAILURE() << file.status();
    return g;
  }
  g.prompt_ids = ReadEntry<int32_t>(**file, "prompt_ids");
  g.logits = ReadEntry<float>(**file, "logits");
  g.greedy_ids = ReadEntry<int32_t>(**file, "greedy_ids");
  if (const auto* e = (*file)->Find("logits"); e != nullptr && e->shape.size() == 2) g.vocab = e->shape[1];
  return g;
}

// max|a − b| / max(1, max|b|): the error relative to the scale of the expected values.
inline double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

}  // namespace mcserve::testing
