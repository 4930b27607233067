// Conversions between the engine's types and mcserve.v1's messages / gRPC's status.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "engine/sampling/output_stream.h"
#include "engine/serving/model_runner.h"
#include "mcserve/v1/generation.pb.h"

namespace mcserve::server {

// absl → gRPC status (the codes share their numbering). Any thread.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The wire's finish reason (kError and kNone: UNSPECIFIED). Any thread.
v1::FinishReason ToProto(engine::FinishReason reason);

// Runner counters as a CheckpointStats message. Any thread.
void FillCheckpointStats(const engine::RunnerStats& stats, v1::CheckpointStats* out);

}  // namespace mcserve::server
