// Thread names: the decode threads are named so that `top -H`, `perf` and /proc/PID/task/*/comm show
// which thread is which (the engine loop, the CPU pool's workers) beside gRPC's and the HTTP server's.
#pragma once

#include <pthread.h>

namespace mcserve {

// Names `thread` (Linux keeps at most 15 bytes; a longer name is cut). Best effort. Any thread.
void NameThread(pthread_t thread, const char* name);
// The same for the calling thread.
inline void NameThisThread(const char* name) { NameThread(pthread_self(), name); }

}  // namespace mcserve
