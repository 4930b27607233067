// The device the CUDA-kernel parity tests run on: the CUDA emulator (cuda-emu) by default, a real GPU
// (cuda) when the environment variable MCSERVE_TEST_DEVICE=cuda is set. CTest registers every such
// test binary twice: `<name>` (label emu) and `<name>_gpu` (label gpu, MCSERVE_TEST_DEVICE=cuda).
// Including this header registers a GoogleTest environment that skips every test of the binary
// (GTEST_SKIP, reported as "[  SKIPPED ]") when the device under test is unusable — no GPU, or a build
// without CUDA — and fails them when MCSERVE_TEST_DEVICE holds an unknown value.
#pragma once

#include <array>
#include <cstdlib>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "kernels/core/dtype.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"

namespace mcserve::kernels {

// MCSERVE_TEST_DEVICE, or "" when unset.
inline std::string TestDeviceVariable() {
  const char* v = std::getenv("MCSERVE_TEST_DEVICE");
  return v == nullptr ? std::string() : std::string(v);
}

// kCuda when MCSERVE_TEST_DEVICE=cuda, else kCudaEmu (an unknown value fails every test, see below).
inline Device DeviceUnderTest() {
  return TestDeviceVariable() == "cuda" ? Device::kCuda : Device::kCudaEmu;
}

// True on the emulator, where a kernel can run under two thread schedules (forward and reversed)
// that must agree bit for bit; a GPU has one (its own) schedule, so tests run once there.
inline bool TwoSchedules() { return DeviceUnderTest() == Device::kCudaEmu; }

// True when the device under test computes with the host's math: the emulator compiles the kernels
// with the host compiler against the host's libm, so a per-element op can match the CPU bit for
// bit. A GPU has CUDA's math library (expf, logf, log1pf within 1-2 ulp, not the same roundings)
// and contracts a·b + c into one FMA, so there it matches only to within rounding.
inline bool SameMathAsCpu() { return DeviceUnderTest() == Device::kCudaEmu; }

// Runs `run` under the emulator's forward and then reversed schedule and returns both results, for
// the caller to require them bit-identical; on a real GPU runs it once and returns that result twice.
template <typename F>
auto RunSchedules(F&& run) -> std::array<decltype(run()), 2> {
  if (!TwoSchedules()) {
    auto once = run();
    return {once, once};
  }
  auto fwd = [&] {
    emu::ScopedSchedule s(emu::Schedule::kForward);
    return run();
  }();
  emu::ScopedSchedule s(emu::Schedule::kReverse);
  return {std::move(fwd), run()};
}

// Printed when every test of a binary skips for want of a GPU.
inline constexpr char kNoGpuMarker[] = "mcserve: no usable GPU, every test skipped";

// Skips (or fails, for a bad MCSERVE_TEST_DEVICE) every test of the binary before it starts.
class DeviceUnderTestEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string v = TestDeviceVariable();
    if (!v.empty() && v != "cuda" && v != "cuda-emu") {
      GTEST_FAIL() << "MCSERVE_TEST_DEVICE=" << v << ": want cuda or cuda-emu (or unset)";
    }
    absl::StatusOr<DeviceRuntime*> runtime = RuntimeFor(DeviceUnderTest());
    if (runtime.ok()) return;
    if (DeviceUnderTest() != Device::kCuda) GTEST_FAIL() << "no cuda-emu runtime: " << runtime.status();
    // CTest's <name>_gpu tests recognise this line (SKIP_REGULAR_EXPRESSION, cmake/McserveTest.cmake).
    GTEST_SKIP() << kNoGpuMarker << " (MCSERVE_TEST_DEVICE=cuda): " << runtime.status().ToString();
  }
};

// Registered once per test binary (an inline variable), before gtest_main runs the tests.
inline ::testing::Environment* const kDeviceUnderTestEnvironment =
    ::testing::AddGlobalTestEnvironment(new DeviceUnderTestEnvironment);

}  // namespace mcserve::kernels
