// hint_common.cuh - what the streaming-hint microbenchmarks share: the 16-byte grid-stride
// copy kernel (CS 1: ld.global.cs + st.global.cs; 0: plain loads and stores), a hashed
// random fill, and a CUDA error check that exits.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>

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
