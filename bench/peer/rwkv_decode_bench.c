/* Batch-1 greedy decode rate of rwkv.cpp (the peer of bench/cpu_peer_bench.py): loads an rwkv.cpp
 * model file, feeds a 16-token prompt, then decodes one token per rwkv_eval call, carrying the
 * recurrent state and taking the argmax of the logits. Prints one JSON line with tokens_per_s.
 * Compiled by bench/cpu_peer_bench.py against a librwkv it builds; not part of the CMake tree. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rwkv.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Index of the largest of n logits (greedy sampling). */
static uint32_t argmax(const float* logits, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return (uint32_t)best;
}

int main(int argc, char** argv) {
  const char* model = NULL;
  int threads = 1, steps = 128, warmup = 8, prefill = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    int* field = !strcmp(argv[i], "--threads")   ? &threads
                 : !strcmp(argv[i], "--steps")   ? &steps
                 : !strcmp(argv[i], "--warmup")  ? &warmup
                 : !strcmp(argv[i], "--prefill") ? &prefill
                                                 : NULL;
    if (!strcmp(argv[i], "--model")) {
      model = argv[i + 1];
    } else if (field) {
      *field = atoi(argv[i + 1]);
    } else {
      model = NULL;
      break;
    }
  }
  if (!model || threads < 1 || steps < 1 || prefill < 1 || warmup < 0) {
    fprintf(stderr, "usage: rwkv_decode_bench --model FILE [--threads T] [--steps N] [--warmup W] [--prefill P]\n");
    return 2;
  }
  struct rwkv_context* ctx = rwkv_init_from_file(model, (uint32_t)threads, 0);
  if (!ctx) {
    fprintf(stderr, "rwkv_decode_bench: cannot load %s\n", model);
    return 1;
  }
  const size_t vocab = rwkv_get_n_vocab(ctx);
  float* state = malloc(rwkv_get_state_len(ctx) * sizeof(float));
  float* logits = malloc(rwkv_get_logits_len(ctx) * sizeof(float));
  rwkv_init_state(ctx, state);
  for (int t = 0; t < prefill; ++t) { /* the same prompt shape as decode_bench's slot 0 */
    if (!rwkv_eval(ctx, (uint32_t)((13 * t + 3) % vocab), state, state, logits)) return 1;
  }
  uint32_t token = argmax(logits, vocab);
  for (int s = 0; s < warmup; ++s) {
    if (!rwkv_eval(ctx, token, state, state, logits)) return 1;
    token = argmax(logits, vocab);
  }
  const double start = now_seconds();
  for (int s = 0; s < steps; ++s) {
    if (!rwkv_eval(ctx, token, state, state, logits)) return 1;
    token = argmax(logits, vocab);
  }
  const double seconds = now_seconds() - start;
  for (size_t i = 0; i < vocab; ++i) {
    if (!isfinite(logits[i])) { /* a rate over NaN logits would mean nothing */
      fprintf(stderr, "rwkv_decode_bench: logit %zu is not finite\n", i);
      return 1;
    }
  }
  printf(
      "{\"engine\": \"rwkv.cpp\", \"batch\": 1, \"threads\": %d, \"steps\": %d, \"seconds\": %.4f, "
      "\"tokens_per_s\": %.1f, \"state_bytes_per_request\": %zu, \"last_token\": %u}\n",
      threads, steps, seconds, steps / seconds, rwkv_get_state_len(ctx) * sizeof(float), token);
  free(logits);
  free(state);
  rwkv_free(ctx);
  return 0;
}
