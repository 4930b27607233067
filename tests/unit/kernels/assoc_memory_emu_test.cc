// AssocMemory on the CUDA emulator against the CPU backend (read, then write; first writes,
// correction on and off, scattered slots, an empty sequence; more columns than threads); both
// emulator schedules bit-identical. Every value is the CPU's arithmetic; only FMA contraction may
// differ, hence 2e-5 relative.
#include <array>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "assoc_case.h"
#include "emu_test_util.h"

namespace mcserve::kernels {
namespace {

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void CheckCase(const AssocCase& c) {
  const absl::StatusOr<AssocResult> cpu = RunAssoc(c, Device::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::array<absl::StatusOr<AssocResult>, 2> emu = RunSchedules([&] { return RunAssoc(c, DeviceUnderTest()); });
  for (const auto& r : emu) ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(emu[0]->h, cpu->h, 2e-5f, "h");
  ExpectNear(emu[0]->delta, cpu->delta, 2e-5f, "delta");
  ExpectNear(emu[0]->gamma, cpu->gamma, 2e-5f, "gamma");
  ExpectNear(emu[0]->a, cpu->a, 2e-5f, "a");
  ExpectNear(emu[0]->z, cpu->z, 2e-5f, "z");
  EXPECT_TRUE(BitEqual(emu[0]->h, emu[1]->h));
  EXPECT_TRUE(BitEqual(emu[0]->a, emu[1]->a));
  EXPECT_TRUE(BitEqual(emu[0]->z, emu[1]->z));
  EXPECT_TRUE(BitEqual(emu[0]->delta, emu[1]->delta));
}

TEST(AssocMemoryEmuTest, MatchesTheCpu) {
  AssocCase c;
  c.Randomize(1);
  CheckCase(c);
  c.correction = false;
  CheckCase(c);
}

TEST(AssocMemoryEmuTest, WideRows) {
  AssocCase c;
  c.nf = 24;
  c.d = 300;  // more columns than a block's threads
  c.lens = {4, 2};
  c.slots = {1, 0};
  c.first = {0, 0};
  c.num_slots = 2;
  c.Randomize(9);
  CheckCase(c);
}

}  // namespace
}  // namespace mcserve::kernels
