// copy_sizes.cu - microbenchmark (BENCHMARKS.md, twenty-third set): does cudaMemcpyAsync's
// device-to-device speed depend on the byte count's alignment? The half-sizes of `kfuse bench`
// rows (bytes / 2 of e.g. rms_norm 16128x2048 bf16 = 2^11 x odd) as they are and rounded up to
// 4 KiB / 64 KiB / 2 MiB, laid out as kfuse bench lays its copy out (two 256-byte aligned sets,
// destination at align_up(size, 256) after the source), timed as 30 back-to-back calls between
// events on a stream and as one replay of a graph holding the same 30 calls; the .cs copy
// kernel of hint_common.cuh (size rounded down to 16 bytes) for comparison.
// Build: nvcc -O3 -arch=sm_90 -o copy_sizes copy_sizes.cu
#include <vector>
#include <algorithm>
#include "hint_common.cuh"

static size_t up(size_t x, size_t a) { return (x + a - 1) / a * a; }

int main() {
  const size_t base_sizes[] = {67112960, 66062336, 58723840, 41948160, 83973125, 12600065};
  const int sets = 2, reps = 30;
  size_t most = up(83973125, 2 << 20);
  size_t stride = 2 * up(most, 256);
  char *arena = hint_filled_arena(stride * sets, 7);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  printf("%12s %6s %8s | %10s %10s %10s | GB/s (stream graph kernel), moved = 2 x size\n",
         "size", "round", "2^k", "stream us", "graph us", "kernel us");
  for (size_t bs : base_sizes)
  for (size_t r : {(size_t)1, (size_t)4096, (size_t)65536, (size_t)(2 << 20)}) {
    size_t n = up(bs, r);
    int k = 0; while (k < 30 && (n >> k) % 2 == 0) k++;
    float res[3];
    for (int what = 0; what < 3; what++) {
      auto issue = [&]() {
        for (int i = 0; i < reps; i++) {
          char *src = arena + (size_t)(i % sets) * stride;
          char *dst = src + up(n, 256);
          if (what == 2)
            hint_copy_kernel<1><<<132 * 8, 256, 0, st>>>((const uint4 *)src, (uint4 *)dst, n / 16);
          else
            cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, st);
        }
      };
      cudaGraphExec_t ge = 0;
      if (what == 1) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        issue();
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        cudaGraphDestroy(g);
      }
      std::vector<float> v;
      for (int smp = 0; smp < 13; smp++) {
        float ms;
        cudaEventRecord(e0, st);
        if (what == 1) CK(cudaGraphLaunch(ge, st)); else issue();
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        cudaEventElapsedTime(&ms, e0, e1);
        if (smp >= 3) v.push_back(ms * 1000 / reps);
      }
      if (ge) cudaGraphExecDestroy(ge);
      std::sort(v.begin(), v.end());
      res[what] = v[v.size() / 2];
    }
    printf("%12zu %6zu %8d | %10.2f %10.2f %10.2f | %6.0f %6.0f %6.0f\n", n, r, k, res[0], res[1],
           res[2], 2e-3 * n / res[0], 2e-3 * n / res[1], 2e-3 * n / res[2]);
  }
  CK(cudaGetLastError());
  return 0;
}
