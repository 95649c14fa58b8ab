// hint_common.cuh - what the streaming-hint microbenchmarks share: the 16-byte grid-stride
// copy kernel (CS 1: ld.global.cs + st.global.cs; 0: plain loads and stores), a hashed
// random fill (and an arena allocated and filled with it), a CUDA error check that exits,
// and graph timing (graph_us_per_call).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

template <int CS>
__global__ void hint_copy_kernel(const uint4 *__restrict__ a, uint4 *__restrict__ b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = CS ? __ldcs(a + i) : a[i];
        if (CS) __stcs(b + i, v);
        else b[i] = v;
    }
}

__global__ void hint_fill_kernel(unsigned *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
        p[i] = x;
    }
}

// `bytes` of device memory filled with hashed random bits (hint_fill_kernel), ready to use
static char *hint_filled_arena(size_t bytes, unsigned seed)
{
    char *arena;
    CK(cudaMalloc(&arena, bytes));
    hint_fill_kernel<<<1024, 256>>>((unsigned *)arena, bytes / 4, seed);
    CK(cudaDeviceSynchronize());
    return arena;
}

// The median time per call, in us, of `calls` calls issued by issue(st) on stream st:
// captured into one graph, replayed `samples` times between events, the first `warm`
// replays dropped.
template <typename F>
static float graph_us_per_call(cudaStream_t st, int calls, int samples, int warm, F issue)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    issue(st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaGraphDestroy(g);
    std::vector<float> smp;
    for (int s = 0; s < samples; s++) {
        float ms;
        cudaEventRecord(e0, st);
        CK(cudaGraphLaunch(ge, st));
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        cudaEventElapsedTime(&ms, e0, e1);
        if (s >= warm) smp.push_back(ms * 1000 / calls);
    }
    cudaGraphExecDestroy(ge);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(smp.begin(), smp.end());
    return smp[smp.size() / 2];
}
