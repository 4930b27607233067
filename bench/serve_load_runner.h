// serve_load's load: sends requests over one GenerationClient with Poisson arrivals and/or a cap on
// the requests in flight, timing each on the client with steady_clock. The streams are read on gRPC's
// callback threads (GenerateAsync), not a thread each, so that the load generator takes as little as
// it can of the cores it shares with the server it measures.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/serve_load_metrics.h"
#include "clients/cpp/generation_client.h"

namespace mcserve::bench {

// Starts streaming one request, timing it into `*record` (TTFT, per-token ITL, E2EL from the moment
// it is sent), and returns at once; `on_done` runs once it has ended and `*record` is complete (a
// gRPC thread). The client and `*record` must outlive the stream. Any thread.
void StartTimedRequest(client::GenerationClient& client, const v1::GenerateRequest& request, RequestRecord* record,
                       std::function<void()> on_done);

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
