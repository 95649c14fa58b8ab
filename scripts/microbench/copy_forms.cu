// copy_forms.cu - microbenchmark: how close do copy kernels of the shapes kfuse's row kernels
// use get to the driver's device-to-device cudaMemcpyAsync, which `kfuse bench` divides by?
// Forms: a grid-stride loop of one 16-byte chunk per thread and iteration, and one-shot blocks
// of 256 threads each moving K chunks per thread (every load issued before the first store,
// as the row kernels hold a row in registers); load hints plain / .cs / .nc, each with and
// without the L2 prefetch-size qualifier .L2::256B; stores plain or .cs. Every variant and the
// memcpy move the same bytes (sizes multiples of 4 KiB), two rotating sets, timed as one
// replay of a graph of 30 calls between events, median of 10 samples, several rounds
// interleaved. Results: BENCHMARKS.md, twenty-fifth set.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o copy_forms copy_forms.cu
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
#include "hint_common.cuh"

// LD: 0 plain, 1 .cs, 2 .nc.L1::no_allocate; +4: with .L2::256B
template <int LD>
static __device__ __forceinline__ uint4 ld16(const uint4 *p)
{
    uint4 v;
    if (LD == 0) asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (LD == 1) asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (LD == 2) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (LD == 4) asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (LD == 5) asm volatile("ld.global.cs.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (LD == 6) asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
template <int ST>
static __device__ __forceinline__ void st16(uint4 *p, uint4 v)
{
    if (ST) __stcs(p, v);
    else *p = v;
}

template <int LD, int ST>
__global__ void copy_stride(const uint4 *__restrict__ a, uint4 *__restrict__ b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        st16<ST>(b + i, ld16<LD>(a + i));
}

// one-shot: block j moves chunks [j K 256, (j + 1) K 256); thread t chunks t + 256 k
template <int K, int LD, int ST>
__global__ void __launch_bounds__(256) copy_block(const uint4 *__restrict__ a, uint4 *__restrict__ b, size_t n)
{
    const size_t base = (size_t)blockIdx.x * K * 256 + threadIdx.x;
    uint4 v[K];
#pragma unroll
    for (int k = 0; k < K; k++)
        if (base + 256 * k < n) v[k] = ld16<LD>(a + base + 256 * k);
#pragma unroll
    for (int k = 0; k < K; k++)
        if (base + 256 * k < n) st16<ST>(b + base + 256 * k, v[k]);
}

struct variant {
    std::string name;
    std::function<void(const uint4 *, uint4 *, size_t, cudaStream_t)> run; // empty: memcpy
};

template <int K, int LD, int ST>
static variant vb(const char *name)
{
    return {name, [](const uint4 *a, uint4 *b, size_t n, cudaStream_t st) {
                copy_block<K, LD, ST><<<(unsigned)((n + K * 256 - 1) / (K * 256)), 256, 0, st>>>(a, b, n);
            }};
}
template <int LD, int ST>
static variant vs(const char *name)
{
    return {name, [](const uint4 *a, uint4 *b, size_t n, cudaStream_t st) {
                copy_stride<LD, ST><<<132 * 8, 256, 0, st>>>(a, b, n);
            }};
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 3;
    const size_t sizes[] = {(size_t)64 << 20, (size_t)40 << 20, (size_t)256 << 20};
    std::vector<variant> vars = {
        {"memcpy", nullptr},
        vs<1, 1>("stride1 ld.cs st.cs"),
        vs<5, 1>("stride1 ld.cs.L2::256B st.cs"),
        vb<4, 0, 0>("block4 plain"),
        vb<4, 1, 1>("block4 ld.cs st.cs"),
        vb<4, 4, 0>("block4 ld.L2::256B st"),
        vb<4, 5, 1>("block4 ld.cs.L2::256B st.cs"),
        vb<4, 2, 1>("block4 ld.nc.na st.cs"),
        vb<4, 6, 1>("block4 ld.nc.na.L2::256B st.cs"),
        vb<2, 1, 1>("block2 ld.cs st.cs"),
        vb<2, 5, 1>("block2 ld.cs.L2::256B st.cs"),
        vb<8, 1, 1>("block8 ld.cs st.cs"),
        vb<8, 5, 1>("block8 ld.cs.L2::256B st.cs"),
    };
    const int sets = 2, reps = 30;
    size_t most = sizes[2];
    size_t stride = 2 * most + (2 << 20);
    char *arena = hint_filled_arena(stride * sets, 7);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (size_t n : sizes) {
        printf("size %zu bytes (moved 2 x size), us per call, graph of %d calls; rounds:\n", n, reps);
        std::vector<std::vector<float>> res(vars.size());
        for (int r = 0; r < rounds; r++)
            for (size_t vi = 0; vi < vars.size(); vi++) {
                const variant &v = vars[vi];
                res[vi].push_back(graph_us_per_call(st, reps, 13, 3, [&](cudaStream_t s) {
                    for (int i = 0; i < reps; i++) {
                        char *src = arena + (size_t)(i % sets) * stride;
                        char *dst = src + n + (1 << 20);
                        if (v.run) v.run((const uint4 *)src, (uint4 *)dst, n / 16, s);
                        else cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
                    }
                }));
            }
        for (size_t vi = 0; vi < vars.size(); vi++) {
            printf("  %-34s", vars[vi].name.c_str());
            for (int r = 0; r < rounds; r++) printf(" %8.2f (%.3f)", res[vi][r], res[vi][r] / res[0][r]);
            printf("\n");
        }
    }
    CK(cudaGetLastError());
    return 0;
}
