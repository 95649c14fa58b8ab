// hint_graph.cu - microbenchmark (BENCHMARKS.md, twenty-first set): the same kernels and copy with
// constant or random data, stream launches or a CUDA graph replay. Build: nvcc -O3 -arch=sm_90
// -o hint_graph hint_graph.cu
#include <vector>
#include <algorithm>
#include "hint_common.cuh"
int main() {
  size_t half = 67108864; const int sets = 2, reps = 30;
  std::vector<char *> in(sets), out(sets);
  for (int s = 0; s < sets; s++) { CK(cudaMalloc((void **)&in[s], half)); CK(cudaMalloc((void **)&out[s], half)); }
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const char *names[3] = {"memcpy", "kernel cs", "kernel plain"};
  for (int data = 0; data < 2; data++) {
    for (int s = 0; s < sets; s++) {
      if (data == 0) { CK(cudaMemset(in[s], 1, half)); CK(cudaMemset(out[s], 2, half)); }
      else { hint_fill_kernel<<<1024, 256>>>((unsigned *)in[s], half / 4, 17 + s); hint_fill_kernel<<<1024, 256>>>((unsigned *)out[s], half / 4, 99 + s); }
    }
    CK(cudaDeviceSynchronize());
    for (int graph = 0; graph < 2; graph++)
    for (int round = 0; round < 2; round++)
    for (int what = 0; what < 3; what++) {
      auto issue = [&]() {
        for (int r = 0; r < reps; r++) {
          int s = r % sets;
          if (what == 0) cudaMemcpyAsync(out[s], in[s], half, cudaMemcpyDeviceToDevice, st);
          else if (what == 1) hint_copy_kernel<1><<<132 * 8, 256, 0, st>>>((const uint4 *)in[s], (uint4 *)out[s], half / 16);
          else hint_copy_kernel<0><<<132 * 8, 256, 0, st>>>((const uint4 *)in[s], (uint4 *)out[s], half / 16);
        }
      };
      cudaGraphExec_t ge = 0;
      if (graph) { cudaGraph_t g; CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal)); issue(); CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0)); CK(cudaGraphLaunch(ge, st)); }
      else issue();
      std::vector<float> v; float ms;
      for (int smp = 0; smp < 11; smp++) {
        cudaEventRecord(e0, st);
        if (graph) cudaGraphLaunch(ge, st); else issue();
        cudaEventRecord(e1, st); CK(cudaEventSynchronize(e1)); cudaEventElapsedTime(&ms, e0, e1); v.push_back(ms * 1000 / reps);
      }
      std::sort(v.begin(), v.end());
      printf("%-8s %-6s %-13s median %.2f us  min %.2f\n", data ? "random" : "constant", graph ? "graph" : "stream", names[what], v[5], v[0]);
    }
  }
  return 0;
}
