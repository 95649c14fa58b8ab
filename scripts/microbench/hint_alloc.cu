// hint_alloc.cu - microbenchmark (BENCHMARKS.md, twenty-first set): a 16-byte copy kernel with
// ld.cs + st.cs against plain, and cudaMemcpyAsync, over one arena, a cudaMalloc per buffer and an
// arena with gaps. Build: nvcc -O3 -arch=sm_90 -o hint_alloc hint_alloc.cu
#include <vector>
#include <algorithm>
#include "hint_common.cuh"
int main() {
  size_t half = 67108864; int sets = 2, reps = 30;
  for (int mode = 0; mode < 3; mode++) {
    std::vector<char *> in(sets), out(sets); char *arena = 0;
    if (mode == 0) { CK(cudaMalloc(&arena, 2 * half * sets)); for (int s = 0; s < sets; s++) { in[s] = arena + 2 * half * s; out[s] = in[s] + half; } }
    else if (mode == 1) { for (int s = 0; s < sets; s++) { CK(cudaMalloc((void **)&in[s], half)); CK(cudaMalloc((void **)&out[s], half)); } }
    else { CK(cudaMalloc(&arena, (2 * half + (3 << 21)) * sets)); for (int s = 0; s < sets; s++) { in[s] = arena + (2 * half + (3 << 21)) * s; out[s] = in[s] + half + (3 << 21) / 2 + 4096 * 7; } }
    for (int s = 0; s < sets; s++) { CK(cudaMemset(in[s], 1, half)); CK(cudaMemset(out[s], 2, half)); }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    const char *names[3] = {"memcpy", "kernel cs", "kernel plain"};
    for (int round = 0; round < 3; round++)
    for (int what = 0; what < 3; what++) {
      float ms; std::vector<float> v;
      for (int smp = 0; smp < 11; smp++) {
        cudaEventRecord(e0);
        for (int r = 0; r < reps; r++) {
          int s = r % sets;
          if (what == 0) cudaMemcpyAsync(out[s], in[s], half, cudaMemcpyDeviceToDevice);
          else if (what == 1) hint_copy_kernel<1><<<132 * 8, 256>>>((const uint4 *)in[s], (uint4 *)out[s], half / 16);
          else hint_copy_kernel<0><<<132 * 8, 256>>>((const uint4 *)in[s], (uint4 *)out[s], half / 16);
        }
        cudaEventRecord(e1); CK(cudaEventSynchronize(e1)); cudaEventElapsedTime(&ms, e0, e1); v.push_back(ms * 1000 / reps);
      }
      std::sort(v.begin(), v.end());
      printf("mode %s  %-13s median %.2f us  min %.2f\n", mode == 0 ? "arena   " : mode == 1 ? "separate" : "arena+gap", names[what], v[5], v[0]);
    }
    if (arena) cudaFree(arena); else for (int s = 0; s < sets; s++) { cudaFree(in[s]); cudaFree(out[s]); }
  }
  return 0;
}
