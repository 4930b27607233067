// Test helper: how many threads of this process carry a name (/proc/self/task/*/comm). Test thread only.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace mcserve::testing {

inline int CountThreadsNamed(const std::string& name) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

}  // namespace mcserve::testing
