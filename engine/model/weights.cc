#include "engine/model/weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/safetensors.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {

struct WeightStore::Impl {
  std::string dir;
  // Every tensor, by name, with the file that holds it.
  struct Location {
    std::shared_ptr<const SafetensorsFile> file;
    const SafetensorsEntry* entry = nullptr;
  };
  std::map<std::string, Location, std::less<>> tensors;
};

namespace {

using nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("error reading ", path));
  return std::move(ss).str();
}

// A shard name must stay inside the model directory.
bool IsSafeShardName(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

// Parses the index's weight_map (tensor → shard file name); duplicate keys are errors.
absl::StatusOr<std::map<std::string, std::string>> ParseIndex(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && parsed.is_string() &&
               !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json index;
  try {
    index = json::parse(text, callback, /*allow_exceptions=*/true);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": duplicate key \"", duplicate, "\""));
  }
  if (!index.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": must be a JSON object"));
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": missing or non-object \"weight_map\""));
  }
  std::map<std::string, std::string> weight_map;
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (!it.value().is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map entry \"", it.key(),
                                                     "\" must be a file name string, got ", it.value().type_name()));
    }
    std::string shard = it.value().get<std::string>();
    if (!IsSafeShardName(shard)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map entry \"", it.key(), "\" names shard \"", shard,
                       "\", which is not a relative path inside the model directory"));
    }
    weight_map[it.key()] = std::move(shard);
  }
  if (weight_map.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map is empty"));
  return weight_map;
}

absl::Status AddFile(WeightStore::Impl& impl, std::shared_ptr<const SafetensorsFile> file) {
  for (const SafetensorsEntry& e : file->entries()) {
    auto [it, inserted] = impl.tensors.try_emplace(e.name, WeightStore::Impl::Location{file, &e});
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", e.name, "\" is stored in two shards: ",
                                                     it->second.file->path(), " and ", file->path()));
    }
  }
  return absl::OkStatus();
}

absl::Status OpenSharded(WeightStore::Impl& impl, const std::string& index_path) {
  MCSERVE_ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
  MCSERVE_ASSIGN_OR_RETURN(auto weight_map, ParseIndex(text, index_path));
  std::set<std::string> shards;
  for (const auto& [name, shard] : weight_map) shards.insert(shard);
  for (const std::string& shard : shards) {
    std::string shard_path = JoinPath(impl.dir, shard);
    if (!IsRegularFile(shard_path)) {
      std::string example;
      for (const auto& [name, s] : weight_map) {
        if (s == shard) {
          example = name;
          break;
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": shard ", shard_path, " (holding \"", example,
                                                     "\") does not exist"));
    }
    MCSERVE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(shard_path));
    MCSERVE_RETURN_IF_ERROR(AddFile(impl, std::move(file)));
  }
  for (const auto& [name, shard] : weight_map) {
    auto it = impl.tensors.find(name);
    std::string shard_path = JoinPath(impl.dir, shard);
    if (it == impl.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map puts tensor \"", name, "\" in ",
                                                     shard_path, ", which does not contain it"));
    }
    if (it->second.file->path() != shard_path) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map puts tensor \"", name, "\" in ",
                                                     shard_path, " but it is stored in ",
                                                     it->second.file->path()));
    }
  }
  for (const auto& [name, location] : impl.tensors) {
    if (!weight_map.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor \"", name, "\" of shard ",
                                                     location.file->path(), " is missing from weight_map"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

WeightStore::WeightStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WeightStore::~WeightStore() = default;

absl::StatusOr<std::shared_ptr<const WeightStore>> WeightStore::Open(const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  const std::string single = JoinPath(dir, kSingleFile);
  const std::string index = JoinPath(dir, kIndexFile);
  if (IsRegularFile(single)) {
    MCSERVE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single));
    MCSERVE_RETURN_IF_ERROR(AddFile(*impl, std::move(file)));
  } else if (IsRegularFile(index)) {
    MCSERVE_RETURN_IF_ERROR(OpenSharded(*impl, index));
  } else {
    return absl::NotFoundError(absl::StrCat("no ", kSingleFile, " or ", kIndexFile, " in model directory ", dir));
  }
  return std::make_shared<const WeightStore>(std::move(impl));
}

void WeightStore::DropResidentPages() const {
  std::set<const SafetensorsFile*> done;
  for (const auto& [name, location] : impl_->tensors) {
    if (done.insert(location.file.get()).second) location.file->DropResidentPages();
  }
}

bool WeightStore::Has(std::string_view name) const { return impl_->tensors.find(name) != impl_->tensors.end(); }

absl::StatusOr<kernels::Tensor> WeightStore::Get(std::string_view name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end()) {
    return absl::NotFoundError(absl::StrCat("tensor \"", std::string(name), "\" not found in model directory ", impl_->dir));
  }
  const auto& [file, entry] = it->second;
  const uint8_t* data = file->DataOf(*entry);
  const kernels::DType dtype = entry->dtype;
  const size_t elem = static_cast<size_t>(kernels::DTypeSize(dtype));
  if (reinterpret_cast<uintptr_t>(data) % elem == 0) {
    return kernels::Tensor::WrapHost(data, dtype, entry->shape, file);
  }
  // Misaligned for the element type (a writer that does not pad): copy into an aligned buffer.
  const size_t nbytes = static_cast<size_t>(entry->end - entry->begin);
  constexpr size_t kAlign = 64;
  const size_t rounded = std::max<size_t>(kAlign, (nbytes + kAlign - 1) / kAlign * kAlign);
  void* copy = std::aligned_alloc(kAlign, rounded);
  if (copy == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", nbytes, " bytes to align tensor \"",
                                                     std::string(name), "\" of ", file->path()));
  }
  std::memcpy(copy, data, nbytes);
  std::shared_ptr<const void> owner(copy, [](const void* p) { std::free(const_cast<void*>(p)); });
  return kernels::Tensor::WrapHost(copy, dtype, entry->shape, std::move(owner));
}

absl::StatusOr<kernels::Tensor> WeightStore::Get(std::string_view name, const kernels::Shape& shape) const {
  MCSERVE_ASSIGN_OR_RETURN(kernels::Tensor tensor, Get(name));
  if (tensor.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", std::string(name), "\" in ", FileOf(name), " has shape ",
                                                   kernels::ShapeString(tensor.shape()), " but the config expects ",
                                                   kernels::ShapeString(shape)));
  }
  return tensor;
}

std::vector<std::string> WeightStore::Names() const {
  std::vector<std::string> names;
  names.reserve(impl_->tensors.size());
  for (const auto& [name, location] : impl_->tensors) names.push_back(name);
  return names;
}

std::string WeightStore::FileOf(std::string_view name) const {
  auto it = impl_->tensors.find(name);
  return it == impl_->tensors.end() ? std::string() : it->second.file->path();
}

}  // namespace mcserve::engine
