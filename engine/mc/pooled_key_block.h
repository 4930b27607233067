// PooledKeyBlock: one (slot, layer) list's pooled keys side by side in one device buffer, in list
// order, so that the SSC router and the softmax read-outs stream them instead of chasing one small
// allocation per page (at 64K tokens with C = 256 a token scores 256 keys per layer). The pages keep
// their own keys (a page outlives the list that froze it, through the prefix cache); this is a copy.
// Engine loop thread only, as its owner (CheckpointStore).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class PooledKeyBlock {
 public:
  // Copies `key` [Hs, K] F32 (on `device`) into the next row, growing the buffer by doubling (the
  // rows so far are copied over once); every key of one block has the same shape.
  absl::Status Append(const kernels::Tensor& key, kernels::Device device);
  // Forgets the newest `count` rows (never shrinks the buffer).
  void DropNewest(int64_t count);
  // Forgets every row and frees the buffer.
  void Clear();
  // Row i's view [Hs, K] (read-only for kernels: the store's data). Valid until the next Append or Clear.
  std::span<const kernels::Tensor> keys() const { return rows_; }
  // Bytes of the buffer (its capacity, not only the rows in use).
  int64_t capacity_bytes() const { return buffer_.defined() ? buffer_.nbytes() : 0; }

 private:
  // Whether the buffer holds rows shaped like `key` and has one free.
  bool HasRoomFor(const kernels::Tensor& key) const;
  // A buffer of twice the rows (at least kFirstCapacity) with the rows so far copied over and re-viewed.
  absl::Status Grow(const kernels::Tensor& key, kernels::Device device);

  kernels::Tensor buffer_;              // [capacity, Hs, K] F32 on the device
  std::vector<kernels::Tensor> rows_;   // [rows] views [Hs, K] of buffer_'s first rows
};

}  // namespace mcserve::engine
