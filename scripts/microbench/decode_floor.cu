// decode_floor.cu - microbenchmark: where the time of a decode-sized RMSNorm row (1 x 4096
// bf16) goes under graph timing, step by step, against the empty kernel and the driver's
// memcpy of the same bytes. Each call reads a cold input set (sets 64 KiB apart over 128 MiB,
// more than twice the L2), as `kfuse bench` does; one graph holds one call per set and is
// replayed between events; us per call, median of 9 replays. Results: BENCHMARKS.md,
// twenty-fifth set.
// Steps (one block unless noted; x, w, y bf16 of 4096 elements):
//   empty            an empty kernel
//   memcpy 12 KiB    cudaMemcpyAsync of the bytes kfuse bench's copy moves for this row
//   copy 256x2       x -> y, 256 threads x 2 chunks of 16 bytes
//   +w               ... and y = x * w with w loaded with x (no reduction)
//   +reduce          ... and the sum of squares reduced over the block (shuffles, shared
//                    memory, one barrier), y = x * rsqrt(mean + eps) * w
//   +reduce w-late   the same with w loaded after the reduction
//   warp 32x16       one warp, 16 chunks per lane, w with x, shuffle-only reduction
//   128x4            128 threads x 4 chunks, w with x
//   +reduce, params far / far+exit: the +reduce kernel with its pointers in a 192-byte
//                    parameter struct (x at 0, w at 64, y at 128: other constant-cache lines),
//                    and with an early exit on a row count at 160 before any address math,
//                    as a grid-stride loop's first test does
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o decode_floor decode_floor.cu
#include <vector>
#include <algorithm>
#include <cstring>
#include <cuda_bf16.h>
#include "hint_common.cuh"

static __device__ __forceinline__ void unpack8(uint4 u, float (&f)[8])
{
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        f[2 * j] = __uint_as_float(w[j] << 16);
        f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
}
static __device__ __forceinline__ uint4 pack8(const float (&f)[8])
{
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
        w[j] = *reinterpret_cast<unsigned *>(&h);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void k_empty() {}

// MODE 0: copy; 1: x * w; 2: reduce, w with x; 3: reduce, w after
template <int BS, int K, int MODE>
static __device__ __forceinline__ void k_row_body(const uint4 *x, const uint4 *w, uint4 *y)
{
    __shared__ float part[BS / 32];
    uint4 xc[K], wc[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        xc[k] = __ldcs(x + threadIdx.x + k * BS);
        if (MODE == 1 || MODE == 2) wc[k] = __ldg(w + threadIdx.x + k * BS);
    }
    float rstd = 1.0f;
    if (MODE >= 2) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            float f[8];
            unpack8(xc[k], f);
#pragma unroll
            for (int j = 0; j < 8; j++) acc = fmaf(f[j], f[j], acc);
        }
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
        if (BS > 32) {
            if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
            __syncthreads();
            acc = 0.0f;
#pragma unroll
            for (int i = 0; i < BS / 32; i++) acc += part[i];
        }
        rstd = rsqrtf(acc * (1.0f / (BS * K * 8)) + 1e-6f);
    }
    if (MODE == 3) {
#pragma unroll
        for (int k = 0; k < K; k++) wc[k] = __ldg(w + threadIdx.x + k * BS);
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (MODE == 0) {
            __stcs(y + threadIdx.x + k * BS, xc[k]);
        } else {
            float f[8], g[8];
            unpack8(xc[k], f);
            unpack8(wc[k], g);
#pragma unroll
            for (int j = 0; j < 8; j++) f[j] = f[j] * rstd * g[j];
            __stcs(y + threadIdx.x + k * BS, pack8(f));
        }
    }
}

struct far_p {
    const uint4 *x; char pad0[56];
    const uint4 *w; char pad1[56];
    uint4 *y; char pad2[24];
    long long rows; char pad3[24];
};
template <int EXIT>
__global__ void __launch_bounds__(256) k_far(far_p p)
{
    if (EXIT && (long long)blockIdx.x >= p.rows) return;
    k_row_body<256, 2, 2>(p.x, p.w, p.y);
}

template <int BS, int K, int MODE>
__global__ void __launch_bounds__(BS) k_row(const uint4 *x, const uint4 *w, uint4 *y)
{
    k_row_body<BS, K, MODE>(x, w, y);
}

int main()
{
    const size_t set_bytes = 64 << 10, nsets = 2048; // 128 MiB
    // random bits (NaNs and infinities among them): the timing does not depend on the values
    char *arena = hint_filled_arena(set_bytes * nsets, 3);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const char *names[] = {"empty", "memcpy 12 KiB", "copy 256x2", "+w 256x2", "+reduce 256x2",
                           "+reduce w-late 256x2", "warp 32x16", "128x4", "memcpy 8 KiB",
                           "+reduce params far", "+reduce params far+exit"};
    const int nv = 11, rounds = 3;
    std::vector<std::vector<float>> res(nv);
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < nv; v++) {
            res[v].push_back(graph_us_per_call(st, (int)nsets, 11, 2, [&](cudaStream_t q) {
                for (size_t s = 0; s < nsets; s++) {
                    char *b = arena + s * set_bytes;
                    const uint4 *x = (const uint4 *)b, *w = (const uint4 *)(b + 16384);
                    uint4 *y = (uint4 *)(b + 32768);
                    switch (v) {
                    case 0: k_empty<<<1, 32, 0, q>>>(); break;
                    case 1: cudaMemcpyAsync(b + 32768, b, 12288, cudaMemcpyDeviceToDevice, q); break;
                    case 2: k_row<256, 2, 0><<<1, 256, 0, q>>>(x, w, y); break;
                    case 3: k_row<256, 2, 1><<<1, 256, 0, q>>>(x, w, y); break;
                    case 4: k_row<256, 2, 2><<<1, 256, 0, q>>>(x, w, y); break;
                    case 5: k_row<256, 2, 3><<<1, 256, 0, q>>>(x, w, y); break;
                    case 6: k_row<32, 16, 2><<<1, 32, 0, q>>>(x, w, y); break;
                    case 7: k_row<128, 4, 2><<<1, 128, 0, q>>>(x, w, y); break;
                    case 8: cudaMemcpyAsync(b + 32768, b, 8192, cudaMemcpyDeviceToDevice, q); break;
                    case 9:
                    case 10: {
                        far_p fp;
                        memset(&fp, 0, sizeof(fp));
                        fp.x = x; fp.w = w; fp.y = y; fp.rows = 1;
                        if (v == 9) k_far<0><<<1, 256, 0, q>>>(fp);
                        else k_far<1><<<1, 256, 0, q>>>(fp);
                        break;
                    }
                    }
                }
            }));
        }
    printf("us per call (graph of %zu calls, one cold set each), rounds; (minus empty)\n", nsets);
    for (int v = 0; v < nv; v++) {
        printf("  %-24s", names[v]);
        for (int r = 0; r < rounds; r++) printf(" %6.3f (%+.3f)", res[v][r], res[v][r] - res[0][r]);
        printf("\n");
    }
    CK(cudaGetLastError());
    return 0;
}
