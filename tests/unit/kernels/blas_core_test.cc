// BetterBlasCore: which OpenBLAS core a binary re-executes itself for. Only a core whose kernels
// predate AVX2 on a CPU that has it is replaced, by SkylakeX with AVX-512 and Haswell without; the
// AVX2-or-newer choices OpenBLAS makes stand. (bench/blas_core_test.py runs the re-execution itself.)
#include "kernels/cpu/blas_core.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace mcserve::kernels::cpu {
namespace {

constexpr CpuVectorSupport kAvx512{.avx2_fma = true, .avx512 = true};
constexpr CpuVectorSupport kAvx2{.avx2_fma = true, .avx512 = false};
constexpr CpuVectorSupport kSse{.avx2_fma = false, .avx512 = false};

TEST(BetterBlasCoreTest, APreAvx2CoreOnANewerCpuIsReplaced) {
  EXPECT_EQ(BetterBlasCore("Prescott", kAvx512), std::optional<std::string>("SkylakeX"));
  EXPECT_EQ(BetterBlasCore("Prescott", kAvx2), std::optional<std::string>("Haswell"));
  EXPECT_EQ(BetterBlasCore("Nehalem", kAvx2), std::optional<std::string>("Haswell"));
  EXPECT_EQ(BetterBlasCore("Sandybridge", kAvx512), std::optional<std::string>("SkylakeX"));
}

TEST(BetterBlasCoreTest, AnAvx2OrNewerChoiceStands) {
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"}) {
    EXPECT_EQ(BetterBlasCore(core, kAvx512), std::nullopt) << core;
    EXPECT_EQ(BetterBlasCore(core, kAvx2), std::nullopt) << core;
  }
}

TEST(BetterBlasCoreTest, ACpuWithoutAvx2KeepsWhatOpenBlasLoaded) {
  EXPECT_EQ(BetterBlasCore("Prescott", kSse), std::nullopt);
  EXPECT_EQ(BetterBlasCore("Core2", kSse), std::nullopt);
}

}  // namespace
}  // namespace mcserve::kernels::cpu
