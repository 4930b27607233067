// serve_load's load: sends requests over one GenerationClient with Poisson arrivals and/or a cap on
// the requests in flight (one thread per stream), timing each on the client with steady_clock.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/serve_load_metrics.h"
#include "clients/cpp/generation_client.h"

namespace mcserve::bench {

// Streams one request and times it (TTFT, per-token ITL, E2EL from the moment it is sent). The
// calling thread; the client may be shared.
RequestRecord TimeRequest(client::GenerationClient& client, const v1::GenerateRequest& request);

// When requests are sent.
struct LoadPlan {
  int max_concurrency = 0;  // requests in flight at most; 0 = unlimited
  double request_rate = 0;  // mean requests/s of Poisson arrivals; infinity = all at once
  uint64_t seed = 0;        // of the arrival intervals
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in the order of `requests`
  double duration = 0;                 // first send to last finish, seconds
};

// Sends every request (in order) per `plan` and waits for all of them. The calling thread.
LoadResult RunLoad(client::GenerationClient& client, const std::vector<v1::GenerateRequest>& requests,
                   const LoadPlan& plan);

}  // namespace mcserve::bench
