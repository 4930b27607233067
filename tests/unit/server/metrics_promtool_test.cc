// `promtool check metrics` (Debian's prometheus package, installed by scripts/setup.sh) on a rendered,
// fully populated McserveMetrics registry. Fails (never skips) when promtool is missing.
//
// promtool's linter reports every `:` in a metric name ("metric names should not contain ':'",
// colons being reserved for recording rules), and mcserve keeps vLLM-style `mcserve:` names.
// So the text is checked twice: with `mcserve:` spelled `mcserve_` it must pass with exit 0 and no
// output at all; as served, the colon notice must be the only problem promtool reports.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/metrics/caller_metrics.h"
#include "server/metrics/mcserve_metrics.h"
#include "server/metrics/metrics.h"

namespace mcserve::server {
namespace {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  dirs += ":/usr/bin:/usr/local/bin";
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Writes `text` to a temp file and runs `promtool check metrics < file`.
PromtoolResult RunPromtool(const std::string& text) {
  PromtoolResult r;
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    r.output = "promtool not found on PATH (install Debian's prometheus package: scripts/setup.sh)";
    return r;
  }
  char tmpl[] = "/tmp/mcserve_metrics_promtool_XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) {
    r.output = "mkstemp failed";
    return r;
  }
  close(fd);
  {
    std::ofstream f(tmpl, std::ios::binary);
    f << text;
  }
  const std::string cmd = "'" + promtool + "' check metrics < '" + tmpl + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    r.output = "popen failed";
    unlink(tmpl);
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  unlink(tmpl);
  return r;
}

// A registry with every mcserve family populated (gauges, counters, all three histograms).
std::string RenderPopulated() {
  Registry registry;
  auto m = McserveMetrics::Create(registry, "mcserve-tiny \"v1\"\\main");  // exercises escaping
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  engine::EngineStats s;
  s.slots_total = 4;
  s.slots_used = 3;
  s.running = 3;
  s.waiting = 2;
  s.tokens_generated = 1234;
  s.prompt_tokens_processed = 500;
  s.prompt_tokens_cached = 256;
  s.runner = {.device_pages = 10, .host_pages = 20, .referenced_pages = 5, .stagings = 7,
              .prefix_hits = 3, .prefix_misses = 4, .prefix_cached_tokens = 256, .evictions = 1,
              .prefix_cache_entries = 6, .prefix_cache_bytes = 98304, .prefix_cache_budget_bytes = 1 << 30};
  s.write_timeouts = 2;
  s.finished[static_cast<int>(engine::FinishReason::kStop)] = 5;
  s.finished[static_cast<int>(engine::FinishReason::kLength)] = 2;
  s.finished[static_cast<int>(engine::FinishReason::kCancelled)] = 1;
  s.finished[static_cast<int>(engine::FinishReason::kError)] = 1;
  registry.AddRenderHook([&] { (*m)->UpdateFromEngineStats(s); });
  for (double v : {0.0005, 0.03, 0.2, 1.7, 3000.0}) (*m)->time_to_first_token.Observe(v);
  for (double v : {0.012, 0.02, 0.09, 100.0}) (*m)->inter_token_latency.Observe(v);
  for (double v : {0.4, 12.5, 8000.0}) (*m)->e2e_request_latency.Observe(v);
  auto callers = CallerMetrics::Create(registry, "mcserve-tiny \"v1\"\\main", {"alice", "bob"});
  EXPECT_TRUE(callers.ok()) << callers.status();
  if (!callers.ok()) return "";
  (*callers)->RequestFinished("alice", engine::FinishReason::kStop, 12, 30);
  (*callers)->RequestAborted("bob");
  (*callers)->Unauthenticated();
  return registry.Render();
}

TEST(MetricsPromtool, McserveMetricsPassWithUnderscoreNames) {
  const std::string text = RenderPopulated();
  ASSERT_FALSE(text.empty());
  ASSERT_NE(text.find("mcserve:e2e_request_latency_seconds_bucket"), std::string::npos);
  const std::string underscored = absl::StrReplaceAll(text, {{"mcserve:", "mcserve_"}});
  const PromtoolResult r = RunPromtool(underscored);
  EXPECT_EQ(r.exit_code, 0) << r.output << "\n--- text ---\n" << underscored;
  EXPECT_EQ(r.output, "") << "--- text ---\n" << underscored;
}

TEST(MetricsPromtool, McserveMetricsOnlyColonNotices) {
  const std::string text = RenderPopulated();
  ASSERT_FALSE(text.empty());
  const PromtoolResult r = RunPromtool(text);
  // 0 = clean, 3 = lint problems only (1 would be a parse error).
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << "exit " << r.exit_code << ": " << r.output;
  int notices = 0;
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "mcserve:") &&
                absl::EndsWith(line, " metric names should not contain ':'"))
        << "unexpected promtool problem: " << line;
    ++notices;
  }
  EXPECT_EQ(notices, 24) << r.output;  // one per family
}

// The checker itself can fail: promtool rejects broken text and lints a counter without _total.
TEST(MetricsPromtool, PromtoolRejectsBadText) {
  const PromtoolResult broken = RunPromtool("# TYPE x gauge\nx{a=\"b} 1\n");
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  Registry registry;
  (*(*registry.AddCounter("requests", "Requests."))->Get({}))->Increment();
  const PromtoolResult lint = RunPromtool(registry.Render());
  EXPECT_EQ(lint.exit_code, 3) << lint.output;
  EXPECT_NE(lint.output.find("_total"), std::string::npos) << lint.output;
}

}  // namespace
}  // namespace mcserve::server
