// libFuzzer target: arbitrary bytes as a whole safetensors file image, through the header parser
// and validation. Must never crash, hang or trip ASan/UBSan; accepted layouts must be self-consistent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mcserve::engine::ParseSafetensorsHeader;
  using mcserve::engine::ParseSafetensorsImage;
  const std::string_view image(reinterpret_cast<const char*>(data), size);

  auto layout = ParseSafetensorsImage(image, "fuzz.safetensors");
  if (layout.ok()) {
    if (layout->data_offset + layout->data_size != size) __builtin_trap();
    uint64_t covered = 0;
    unsigned checksum = 0;
    for (const auto& e : layout->entries) {
      if (e.begin > e.end || e.end > layout->data_size) __builtin_trap();
      covered += e.end - e.begin;
      // Touch every byte the entry claims, as a weight loader would.
      for (uint64_t i = e.begin; i < e.end; ++i) checksum += data[layout->data_offset + i];
    }
    if (covered != layout->data_size) __builtin_trap();
    if (checksum == 0xdeadbeef) return 0;  // keep the loop observable
  } else if (layout.status().message().empty()) {
    __builtin_trap();  // errors must say what is wrong
  }

  // The same bytes as a bare header, against a data section of `size` bytes.
  (void)ParseSafetensorsHeader(image, size, "fuzz-header");
  return 0;
}
