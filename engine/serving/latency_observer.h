// LatencyObserver: where the engine loop reports each request's latencies as they happen, in vLLM's
// terms (time to first token, inter-token latency, end-to-end latency), measured in the engine with
// a monotonic clock from Submit. The metrics layer implements it (server/metrics/).
#pragma once

#include "engine/sampling/output_stream.h"

namespace mcserve::engine {

// Called on the engine loop thread only; implementations must be cheap and never block (they run
// between model steps).
class LatencyObserver {
 public:
  virtual ~LatencyObserver() = default;
  // A request's first generated token, `seconds` after it was submitted (queueing and prefill included).
  virtual void OnFirstToken(double seconds) = 0;
  // Each later token, `seconds` after the request's previous token.
  virtual void OnInterToken(double seconds) = 0;
  // The request ended (any reason, cancellations and errors included), `seconds` after submission.
  virtual void OnFinished(double seconds, FinishReason reason) = 0;
};

}  // namespace mcserve::engine
