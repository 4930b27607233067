#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {
namespace {

using nlohmann::json;

// The header is a flat object of objects; anything deeper than this is rejected while parsing.
constexpr int kMaxJsonDepth = 8;

// Thrown from the parser callback to stop parsing; caught in ParseHeaderJson.
struct HeaderJsonError {
  std::string message;
};

absl::Status Invalid(const std::string& source, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors file ", source, ": ", problem));
}

// Parses JSON text rejecting duplicate keys (nlohmann keeps the last one silently) and deep nesting.
absl::StatusOr<json> ParseHeaderJson(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) {
      throw HeaderJsonError{absl::StrCat("header JSON is nested deeper than ", kMaxJsonDepth, " levels")};
    }
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second) {
            throw HeaderJsonError{absl::StrCat("duplicate key \"", key, "\" in header")};
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const HeaderJsonError& e) {
    return Invalid(source, e.message);
  } catch (const json::exception& e) {
    return Invalid(source, absl::StrCat("header is not valid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return Invalid(source, absl::StrCat("cannot parse header: ", e.what()));
  }
}

// Local versions of kernels::DTypeName / ShapeString, so this file (and its fuzzer) links alone.
std::string DtypeString(kernels::DType t) {
  switch (t) {
    case kernels::DType::kF32: return "F32";
    case kernels::DType::kF16: return "F16";
    case kernels::DType::kBF16: return "BF16";
    case kernels::DType::kI32: return "I32";
  }
  return "?";
}

std::string ShapeStr(const kernels::Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

// Known safetensors dtypes mcserve does not read.
constexpr std::string_view kUnsupportedDtypes[] = {
    "BOOL",    "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "U32", "C64",     "F64",
    "I64",     "U64"};

absl::StatusOr<kernels::DType> ParseDtype(const std::string& dtype, const std::string& tensor,
                                          const std::string& source) {
  if (dtype == "F32") return kernels::DType::kF32;
  if (dtype == "F16") return kernels::DType::kF16;
  if (dtype == "BF16") return kernels::DType::kBF16;
  if (dtype == "I32") return kernels::DType::kI32;
  for (std::string_view known : kUnsupportedDtypes) {
    if (dtype == known) {
      return Invalid(source, absl::StrCat("unsupported dtype ", dtype, " for tensor \"", tensor,
                                          "\" (mcserve reads F32, F16, BF16 and I32)"));
    }
  }
  return Invalid(source, absl::StrCat("unknown dtype \"", dtype, "\" for tensor \"", tensor, "\""));
}

// A JSON number that is a non-negative integer fitting int64.
bool AsNonNegativeInt(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
  } else {
    return false;
  }
  return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const json& info, uint64_t data_size,
                                            const std::string& source) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!info.is_object()) {
    return Invalid(source, absl::StrCat(where, ": entry must be an object, got ", info.type_name()));
  }
  SafetensorsEntry entry;
  entry.name = name;

  auto dtype_it = info.find("dtype");
  if (dtype_it == info.end() || !dtype_it->is_string()) {
    return Invalid(source, absl::StrCat(where, ": missing or non-string \"dtype\""));
  }
  MCSERVE_ASSIGN_OR_RETURN(entry.dtype, ParseDtype(dtype_it->get<std::string>(), name, source));

  auto shape_it = info.find("shape");
  if (shape_it == info.end() || !shape_it->is_array()) {
    return Invalid(source, absl::StrCat(where, ": missing or non-array \"shape\""));
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : *shape_it) {
    uint64_t dim = 0;
    if (!AsNonNegativeInt(d, &dim)) {
      return Invalid(source, absl::StrCat(where, ": shape ", shape_it->dump(),
                                          " must hold non-negative integers"));
    }
    entry.shape.push_back(static_cast<int64_t>(dim));
    if (!overflow && __builtin_mul_overflow(numel, dim, &numel)) overflow = true;
  }
  uint64_t nbytes = 0;
  if (overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(kernels::DTypeSize(entry.dtype)), &nbytes) ||
      nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    // A zero dimension makes any shape empty, even if the other dims overflow.
    bool has_zero = std::find(entry.shape.begin(), entry.shape.end(), 0) != entry.shape.end();
    if (!has_zero) {
      return Invalid(source, absl::StrCat(where, ": shape ", ShapeStr(entry.shape),
                                          " has too many elements"));
    }
    nbytes = 0;
  }

  auto offsets_it = info.find("data_offsets");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !AsNonNegativeInt((*offsets_it)[0], &entry.begin) || !AsNonNegativeInt((*offsets_it)[1], &entry.end)) {
    return Invalid(source, absl::StrCat(where, ": \"data_offsets\" must be [begin, end] of non-negative integers"));
  }
  if (entry.begin > entry.end) {
    return Invalid(source, absl::StrCat(where, ": data_offsets [", entry.begin, ", ", entry.end,
                                        "] has begin > end"));
  }
  if (entry.end > data_size) {
    return Invalid(source, absl::StrCat(where, ": data_offsets [", entry.begin, ", ", entry.end,
                                        "] run past the end of the ", data_size, "-byte data section"));
  }
  if (entry.end - entry.begin != nbytes) {
    return Invalid(source, absl::StrCat(where, ": data_offsets [", entry.begin, ", ", entry.end, "] hold ",
                                        entry.end - entry.begin, " bytes but ", DtypeString(entry.dtype),
                                        ShapeStr(entry.shape), " needs ", nbytes));
  }
  return entry;
}

// Every byte of the data section belongs to exactly one tensor (no overlap, no hole).
absl::Status CheckCoverage(std::vector<const SafetensorsEntry*> sorted, uint64_t data_size,
                           const std::string& source) {
  std::sort(sorted.begin(), sorted.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t cursor = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : sorted) {
    if (e->begin < cursor) {
      return Invalid(source, absl::StrCat("tensors \"", previous->name, "\" [", previous->begin, ", ",
                                          previous->end, ") and \"", e->name, "\" [", e->begin, ", ", e->end,
                                          ") overlap"));
    }
    if (e->begin > cursor) {
      return Invalid(source, absl::StrCat("hole in the data section: bytes [", cursor, ", ", e->begin,
                                          ") before tensor \"", e->name, "\" belong to no tensor"));
    }
    if (e->end > cursor || previous == nullptr) previous = e;
    cursor = std::max(cursor, e->end);
  }
  if (cursor != data_size) {
    return Invalid(source, absl::StrCat("hole in the data section: bytes [", cursor, ", ", data_size,
                                        ") after the last tensor belong to no tensor"));
  }
  return absl::OkStatus();
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

absl::StatusOr<SafetensorsLayout> ParseSafetensorsHeaderWithMetadata(std::string_view header_bytes,
                                                                     uint64_t data_section_size,
                                                                     const std::string& source) {
  if (header_bytes.size() > kMaxSafetensorsHeaderSize) {
    return Invalid(source, absl::StrCat("header of ", header_bytes.size(), " bytes exceeds the ",
                                        kMaxSafetensorsHeaderSize, "-byte limit"));
  }
  size_t first = 0;
  while (first < header_bytes.size() && IsJsonSpace(header_bytes[first])) ++first;
  if (first == header_bytes.size() || header_bytes[first] != '{') {
    return Invalid(source, "header must be a JSON object starting with '{'");
  }
  MCSERVE_ASSIGN_OR_RETURN(json header, ParseHeaderJson(header_bytes, source));
  if (!header.is_object()) return Invalid(source, "header must be a JSON object");

  SafetensorsLayout layout;
  layout.data_size = data_section_size;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Invalid(source, "__metadata__ must be an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return Invalid(source, absl::StrCat("__metadata__ value for \"", m.key(), "\" must be a string, got ",
                                              m.value().type_name()));
        }
        layout.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    MCSERVE_ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(it.key(), it.value(), data_section_size, source));
    layout.entries.push_back(std::move(entry));
  }
  std::vector<const SafetensorsEntry*> pointers;
  pointers.reserve(layout.entries.size());
  for (const SafetensorsEntry& e : layout.entries) pointers.push_back(&e);
  MCSERVE_RETURN_IF_ERROR(CheckCoverage(std::move(pointers), data_section_size, source));
  std::sort(layout.entries.begin(), layout.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
  return layout;
}

absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(std::string_view header_bytes,
                                                                     uint64_t data_section_size,
                                                                     const std::string& source) {
  MCSERVE_ASSIGN_OR_RETURN(SafetensorsLayout layout,
                           ParseSafetensorsHeaderWithMetadata(header_bytes, data_section_size, source));
  return std::move(layout.entries);
}

absl::StatusOr<SafetensorsLayout> ParseSafetensorsImage(std::string_view image, const std::string& source) {
  if (image.size() < 8) {
    return Invalid(source, absl::StrCat("file is ", image.size(), " bytes, too short for the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(image[i]);
  if (n > kMaxSafetensorsHeaderSize) {
    return Invalid(source, absl::StrCat("header length ", n, " exceeds the ", kMaxSafetensorsHeaderSize,
                                        "-byte limit"));
  }
  const uint64_t rest = image.size() - 8;
  if (n > rest) {
    return Invalid(source, absl::StrCat("header length ", n, " is larger than the ", rest,
                                        " bytes that follow it (truncated file?)"));
  }
  MCSERVE_ASSIGN_OR_RETURN(SafetensorsLayout layout,
                           ParseSafetensorsHeaderWithMetadata(image.substr(8, n), rest - n, source));
  layout.data_offset = 8 + n;
  return layout;
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot open safetensors file ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Invalid(path, "not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Invalid(path, absl::StrCat("file is ", size, " bytes, too short for the 8-byte header length"));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot mmap safetensors file ", path, ": ", std::strerror(map_errno)));
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  MCSERVE_ASSIGN_OR_RETURN(
      file->layout_, ParseSafetensorsImage(std::string_view(reinterpret_cast<const char*>(map), size), path));
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

void SafetensorsFile::DropResidentPages() const {
  if (base_ != nullptr) ::madvise(const_cast<uint8_t*>(base_), size_, MADV_DONTNEED);
}

SafetensorsFile::~SafetensorsFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(layout_.entries.begin(), layout_.entries.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  if (it == layout_.entries.end() || it->name != name) return nullptr;
  return &*it;
}

const uint8_t* SafetensorsFile::DataOf(const SafetensorsEntry& entry) const {
  return base_ + layout_.data_offset + entry.begin;
}

}  // namespace mcserve::engine
