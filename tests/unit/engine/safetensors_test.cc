#include "engine/model/safetensors.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using kernels::DType;
using testing::BuildSafetensors;
using testing::F32Bytes;
using testing::FileImage;
using testing::HasError;
using testing::TempDir;
using testing::TensorBytes;
using testing::WriteFile;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// A one-tensor header with the given entry body.
std::string OneEntry(const std::string& body) { return "{\"w\":{" + body + "}}"; }

TEST(SafetensorsHeaderTest, ParsesValidHeaderSortedByName) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("z.bias":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
      R"("a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  auto layout = ParseSafetensorsHeaderWithMetadata(header, 32, "x.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->entries.size(), 2u);
  EXPECT_EQ(layout->entries[0].name, "a.weight");
  EXPECT_EQ(layout->entries[0].dtype, DType::kF32);
  EXPECT_EQ(layout->entries[0].shape, (kernels::Shape{2, 3}));
  EXPECT_EQ(layout->entries[0].begin, 0u);
  EXPECT_EQ(layout->entries[0].end, 24u);
  EXPECT_EQ(layout->entries[1].name, "z.bias");
  EXPECT_EQ(layout->entries[1].dtype, DType::kBF16);
  EXPECT_EQ(layout->metadata.at("format"), "pt");
}

TEST(SafetensorsHeaderTest, AcceptsLeadingAndTrailingWhitespace) {
  const std::string header = "  \n{\"w\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}    ";
  auto entries = ParseSafetensorsHeader(header, 6, "ws.safetensors");
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->at(0).dtype, DType::kF16);
}

TEST(SafetensorsHeaderTest, AcceptsEmptyAndScalarTensorsAndEmptyFile) {
  const std::string header =
      R"({"empty":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]},)"
      R"("scalar":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})";
  auto entries = ParseSafetensorsHeader(header, 4, "s.safetensors");
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->at(1).dtype, DType::kI32);
  EXPECT_TRUE(entries->at(1).shape.empty());
  auto none = ParseSafetensorsHeader("{}", 0, "none.safetensors");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST(SafetensorsHeaderTest, RejectsNonObjectJson) {
  EXPECT_TRUE(HasError(ParseSafetensorsHeader("[1, 2]", 0, "arr.safetensors").status(), kInvalid,
                       {"arr.safetensors", "must be a JSON object"}));
  EXPECT_TRUE(HasError(ParseSafetensorsHeader("", 0, "empty.safetensors").status(), kInvalid,
                       {"empty.safetensors", "'{'"}));
  EXPECT_TRUE(HasError(ParseSafetensorsHeader("{\"w\":", 0, "cut.safetensors").status(), kInvalid,
                       {"cut.safetensors", "not valid JSON"}));
  EXPECT_TRUE(HasError(ParseSafetensorsHeader("{\"w\": 3}", 0, "num.safetensors").status(), kInvalid,
                       {"num.safetensors", "\"w\"", "must be an object"}));
}

TEST(SafetensorsHeaderTest, RejectsDuplicateKey) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(header, 8, "dup.safetensors").status(), kInvalid,
                       {"dup.safetensors", "duplicate key \"w\""}));
}

TEST(SafetensorsHeaderTest, RejectsUnsupportedAndUnknownDtypes) {
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F64","shape":[1],"data_offsets":[0,8])"), 8, "f64.st").status(),
      kInvalid, {"f64.st", "unsupported dtype F64 for tensor \"w\""}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1])"), 1, "f8.st").status(),
      kInvalid, {"unsupported dtype F8_E4M3 for tensor \"w\""}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"Q4","shape":[1],"data_offsets":[0,1])"), 1, "q.st").status(),
      kInvalid, {"q.st", "unknown dtype \"Q4\"", "\"w\""}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":7,"shape":[1],"data_offsets":[0,4])"), 4, "t.st").status(),
      kInvalid, {"\"w\"", "dtype"}));
}

TEST(SafetensorsHeaderTest, RejectsBadShapes) {
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), 4, "neg.st").status(),
      kInvalid, {"neg.st", "\"w\"", "non-negative"}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"), 4, "fl.st").status(),
      kInvalid, {"\"w\"", "non-negative integers"}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":4,"data_offsets":[0,4])"), 4, "sc.st").status(),
      kInvalid, {"\"w\"", "shape"}));
  // 2^32 · 2^32 elements overflows uint64.
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(
                           OneEntry(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4])"), 4,
                           "big.st")
                           .status(),
                       kInvalid, {"big.st", "\"w\"", "too many elements"}));
}

TEST(SafetensorsHeaderTest, RejectsBadOffsets) {
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), 4, "past.st").status(),
      kInvalid, {"past.st", "\"w\"", "past the end"}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[0],"data_offsets":[4,0])"), 4, "rev.st").status(),
      kInvalid, {"rev.st", "\"w\"", "begin > end"}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[1],"data_offsets":[0])"), 4, "one.st").status(),
      kInvalid, {"one.st", "\"w\"", "data_offsets"}));
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"F32","shape":[1])"), 4, "none.st").status(), kInvalid,
      {"\"w\"", "data_offsets"}));
}

TEST(SafetensorsHeaderTest, RejectsWrongByteLengthForShape) {
  EXPECT_TRUE(HasError(
      ParseSafetensorsHeader(OneEntry(R"("dtype":"BF16","shape":[2,3],"data_offsets":[0,8])"), 8, "len.st").status(),
      kInvalid, {"len.st", "\"w\"", "8 bytes", "BF16[2, 3] needs 12"}));
}

TEST(SafetensorsHeaderTest, RejectsOverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(header, 12, "ov.st").status(), kInvalid,
                       {"ov.st", "\"a\"", "\"b\"", "overlap"}));
}

TEST(SafetensorsHeaderTest, RejectsHoles) {
  const std::string gap =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(gap, 12, "gap.st").status(), kInvalid,
                       {"gap.st", "hole", "[4, 8)", "\"b\""}));
  const std::string tail = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(tail, 10, "tail.st").status(), kInvalid,
                       {"tail.st", "hole", "[4, 10)"}));
  EXPECT_TRUE(HasError(ParseSafetensorsHeader("{}", 3, "empty.st").status(), kInvalid, {"hole", "[0, 3)"}));
}

TEST(SafetensorsHeaderTest, RejectsBadMetadata) {
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(R"({"__metadata__":{"format":1}})", 0, "m.st").status(), kInvalid,
                       {"m.st", "__metadata__", "\"format\"", "string"}));
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(R"({"__metadata__":[1]})", 0, "m2.st").status(), kInvalid,
                       {"__metadata__"}));
}

TEST(SafetensorsHeaderTest, RejectsDeepNesting) {
  std::string header = "{\"w\":";
  for (int i = 0; i < 50; ++i) header += "[";
  for (int i = 0; i < 50; ++i) header += "]";
  header += "}";
  EXPECT_TRUE(HasError(ParseSafetensorsHeader(header, 0, "deep.st").status(), kInvalid, {"deep.st", "nested"}));
}

TEST(SafetensorsImageTest, RejectsTruncatedFileAndBadHeaderLength) {
  EXPECT_TRUE(HasError(ParseSafetensorsImage(std::string("\x05\x00\x00", 3), "short.st").status(), kInvalid,
                       {"short.st", "3 bytes", "too short"}));
  // Header length 100 but only 10 bytes follow.
  std::string image = FileImage(std::string(10, ' '), "");
  image[0] = 100;
  EXPECT_TRUE(HasError(ParseSafetensorsImage(image, "trunc.st").status(), kInvalid,
                       {"trunc.st", "header length 100", "10 bytes"}));
  // Header length above the 100 MB limit.
  std::string huge(8, '\0');
  const uint64_t n = kMaxSafetensorsHeaderSize + 1;
  std::memcpy(huge.data(), &n, 8);
  EXPECT_TRUE(HasError(ParseSafetensorsImage(huge, "huge.st").status(), kInvalid, {"huge.st", "limit"}));
}

TEST(SafetensorsImageTest, ComputesDataOffset) {
  const std::string image = BuildSafetensors({{"w", "F32", {2}, F32Bytes({1.f, 2.f})}});
  auto layout = ParseSafetensorsImage(image, "ok.st");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->data_offset, image.size() - 8);
  EXPECT_EQ(layout->data_offset % 8, 0u);
  EXPECT_EQ(layout->data_size, 8u);
}

TEST(SafetensorsFileTest, MapsValidFile) {
  TempDir dir;
  const std::string path = dir.File("w.safetensors");
  WriteFile(path, BuildSafetensors({{"b", "F32", {2}, F32Bytes({3.f, 4.f})}, {"a", "F32", {1}, F32Bytes({5.f})}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  ASSERT_EQ((*file)->entries().size(), 2u);
  const SafetensorsEntry* b = (*file)->Find("b");
  ASSERT_NE(b, nullptr);
  float values[2];
  std::memcpy(values, (*file)->DataOf(*b), sizeof values);
  EXPECT_EQ(values[0], 3.f);
  EXPECT_EQ(values[1], 4.f);
  EXPECT_EQ((*file)->Find("c"), nullptr);
}

TEST(SafetensorsFileTest, ErrorsNameThePath) {
  TempDir dir;
  EXPECT_TRUE(HasError(SafetensorsFile::Open(dir.File("missing.safetensors")).status(), absl::StatusCode::kNotFound,
                       {"missing.safetensors"}));
  const std::string empty = dir.File("empty.safetensors");
  WriteFile(empty, "");
  EXPECT_TRUE(HasError(SafetensorsFile::Open(empty).status(), kInvalid, {empty, "too short"}));
  const std::string garbage = dir.File("garbage.safetensors");
  WriteFile(garbage, FileImage("{\"w\":{\"dtype\":\"F32\"", "abcd"));
  EXPECT_TRUE(HasError(SafetensorsFile::Open(garbage).status(), kInvalid, {garbage, "JSON"}));
  EXPECT_TRUE(HasError(SafetensorsFile::Open(dir.path()).status(), kInvalid, {dir.path(), "not a regular file"}));
}

}  // namespace
}  // namespace mcserve::engine
