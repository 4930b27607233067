#include "server/grpc/proto_convert.h"

#include <string>

namespace mcserve::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

v1::FinishReason ToProto(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    default: return v1::FINISH_REASON_UNSPECIFIED;
  }
}

void FillCheckpointStats(const engine::RunnerStats& stats, v1::CheckpointStats* out) {
  out->set_device_pages(stats.device_pages);
  out->set_host_pages(stats.host_pages);
  out->set_referenced_pages(stats.referenced_pages);
  out->set_stagings(stats.stagings);
  out->set_prefix_hits(stats.prefix_hits);
  out->set_prefix_misses(stats.prefix_misses);
  out->set_prefix_cached_tokens(stats.prefix_cached_tokens);
  out->set_evictions(stats.evictions);
}

}  // namespace mcserve::server
