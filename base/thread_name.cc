#include "base/thread_name.h"

#include <string>

namespace mcserve {

void NameThread(pthread_t thread, const char* name) {
  constexpr size_t kMaxName = 15;  // pthread_setname_np fails on longer names
  const std::string cut = std::string(name).substr(0, kMaxName);
  pthread_setname_np(thread, cut.c_str());
}

}  // namespace mcserve
