// gres_forms.cu - microbenchmark: why does torch.compile's gated residual (out = h + a * gate,
// bf16 2 x 8064 x 2048, gate [B, 1, D] with batch stride 6 D) run at ~0.96 x the device copy of
// its bytes on the H200 while kfuse's in-place row kernel runs at ~1.00 (BENCHMARKS.md,
// thirty-eighth set)? Two suspects, taken apart here with hand-written kernels of each form:
//   in place (y = h) against a separate output (y rotating with the input sets, as the
//   harness keeps a peer's outputs alive), and
//   the geometry: kfuse's row form (256 threads, 2 rows per block, 2 chunks per thread per
//   operand, all loads before the math) against a Triton-like flat form (128 threads, one
//   16-byte chunk per thread per operand, one block per 1024 elements, the gate's index
//   from a division per chunk) and a flat form of 256 threads x 2 chunks.
// The reference is cudaMemcpyAsync of half the bytes moved (rounded up to 4 KiB), and a copy
// kernel of the same bytes. Inputs: 4 sets (h, a, out, gate) of bf16 in [-1, 1), more than
// twice the L2; a graph of 32 calls walks the sets; median of 13 replays (3 dropped); rounds
// interleaved. us per call and time / memcpy.
// Results: BENCHMARKS.md, thirty-ninth set.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o gres_forms gres_forms.cu
#include <vector>
#include <string>
#include <functional>
#include <cuda_bf16.h>
#include "hint_common.cuh"

static const int B = 2, S = 8064, D = 2048, SETS = 4, CALLS = 32;

static __device__ __forceinline__ uint4 gres8(uint4 h, uint4 a, uint4 g)
{
    const unsigned *ph = &h.x, *pa = &a.x, *pg = &g.x;
    unsigned r[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float h0 = __uint_as_float(ph[j] << 16), h1 = __uint_as_float(ph[j] & 0xffff0000u);
        float a0 = __uint_as_float(pa[j] << 16), a1 = __uint_as_float(pa[j] & 0xffff0000u);
        float g0 = __uint_as_float(pg[j] << 16), g1 = __uint_as_float(pg[j] & 0xffff0000u);
        __nv_bfloat162 o = __floats2bfloat162_rn(h0 + a0 * g0, h1 + a1 * g1);
        r[j] = *reinterpret_cast<unsigned *>(&o);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// kfuse's row form: G = 128 threads per row (D / 8 = 256 chunks, 2 per thread), 2 rows per block
__global__ void __launch_bounds__(256, 4) gres_rows(const uint4 *h, const uint4 *a, const uint4 *g,
                                                    uint4 *y, int rows)
{
    const int G = 128, nch = D / 8;
    int row = blockIdx.x * 2 + threadIdx.x / G, lane = threadIdx.x % G;
    if (row >= rows) return;
    size_t off = (size_t)row * nch;
    size_t goff = (size_t)(row / S) * 6 * nch;
    uint4 vh[2], va[2], vg[2];
#pragma unroll
    for (int u = 0; u < 2; u++) {
        vh[u] = h[off + lane + u * G];
        va[u] = a[off + lane + u * G];
        vg[u] = g[goff + lane + u * G];
    }
#pragma unroll
    for (int u = 0; u < 2; u++) y[off + lane + u * G] = gres8(vh[u], va[u], vg[u]);
}

// flat forms: chunk i = (block * BS + thread) * U-strided; the gate's chunk from a division
template <int U>
__global__ void gres_flat(const uint4 *h, const uint4 *a, const uint4 *g, uint4 *y, size_t nch)
{
    const int nd = D / 8;
    size_t base = (size_t)blockIdx.x * blockDim.x * U + threadIdx.x;
    uint4 vh[U], va[U], vg[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        size_t i = base + (size_t)u * blockDim.x;
        if (i < nch) {
            size_t b = i / ((size_t)S * nd);
            vh[u] = h[i];
            va[u] = a[i];
            vg[u] = g[b * 6 * nd + i % nd];
        }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        size_t i = base + (size_t)u * blockDim.x;
        if (i < nch) y[i] = gres8(vh[u], va[u], vg[u]);
    }
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
        p[i] = __float2bfloat16((float)(x >> 8) / (float)(1 << 23) - 1.0f);
    }
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 3;
    const size_t n = (size_t)B * S * D, bytes = n * 2, nch = n / 8, gbytes = (size_t)B * 6 * D * 2;
    const size_t moved = 3 * bytes + (size_t)B * D * 2;
    const size_t half = (moved / 2 + 4095) / 4096 * 4096;
    struct Set { __nv_bfloat16 *h, *a, *y, *g; char *cs, *cd; };
    std::vector<Set> sets(SETS);
    for (int s = 0; s < SETS; s++) {
        CK(cudaMalloc(&sets[s].h, bytes));
        CK(cudaMalloc(&sets[s].a, bytes));
        CK(cudaMalloc(&sets[s].y, bytes));
        CK(cudaMalloc(&sets[s].g, gbytes));
        CK(cudaMalloc(&sets[s].cs, half));
        CK(cudaMalloc(&sets[s].cd, half));
        fill_bf16<<<1024, 256>>>(sets[s].h, n, 11 + s);
        fill_bf16<<<1024, 256>>>(sets[s].a, n, 101 + s);
        fill_bf16<<<1024, 256>>>(sets[s].y, n, 201 + s);
        fill_bf16<<<64, 256>>>(sets[s].g, gbytes / 2, 301 + s);
        fill_bf16<<<1024, 256>>>((__nv_bfloat16 *)sets[s].cs, half / 2, 401 + s);
    }
    CK(cudaDeviceSynchronize());
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    struct Var { std::string name; std::function<void(const Set &, cudaStream_t)> go; };
    const int rows = B * S;
    std::vector<Var> vars = {
        {"memcpy (half the bytes moved)", [&](const Set &t, cudaStream_t s) {
             cudaMemcpyAsync(t.cd, t.cs, half, cudaMemcpyDeviceToDevice, s); }},
        {"copy kernel 256 grid-stride", [&](const Set &t, cudaStream_t s) {
             hint_copy_kernel<0><<<132 * 8, 256, 0, s>>>((const uint4 *)t.cs, (uint4 *)t.cd, half / 16); }},
    };
    // each kernel form twice: writing h (in place), then a separate output y
    typedef std::function<void(const Set &, uint4 *, cudaStream_t)> Form;
    const std::pair<std::string, Form> forms[] = {
        {"rows 256x2", [&](const Set &t, uint4 *y, cudaStream_t s) {
             gres_rows<<<rows / 2, 256, 0, s>>>((const uint4 *)t.h, (const uint4 *)t.a,
                                                (const uint4 *)t.g, y, rows); }},
        {"flat 128x1", [&](const Set &t, uint4 *y, cudaStream_t s) {
             gres_flat<1><<<(nch + 127) / 128, 128, 0, s>>>((const uint4 *)t.h, (const uint4 *)t.a,
                                                          (const uint4 *)t.g, y, nch); }},
        {"flat 256x2", [&](const Set &t, uint4 *y, cudaStream_t s) {
             gres_flat<2><<<(nch + 511) / 512, 256, 0, s>>>((const uint4 *)t.h, (const uint4 *)t.a,
                                                          (const uint4 *)t.g, y, nch); }},
    };
    for (const auto &f : forms) {
        Form go = f.second;
        vars.push_back({f.first + " in place",
                        [go](const Set &t, cudaStream_t s) { go(t, (uint4 *)t.h, s); }});
        vars.push_back({f.first + " out",
                        [go](const Set &t, cudaStream_t s) { go(t, (uint4 *)t.y, s); }});
    }
    printf("gated residual bf16 %dx%dx%d, %zu bytes moved, memcpy of %zu; us per call (x memcpy)\n",
           B, S, D, moved, half);
    std::vector<std::vector<float>> res(vars.size());
    for (int r = 0; r < rounds; r++)
        for (size_t v = 0; v < vars.size(); v++)
            res[v].push_back(graph_us_per_call(st, CALLS, 13, 3, [&](cudaStream_t s) {
                for (int c = 0; c < CALLS; c++) vars[v].go(sets[c % SETS], s);
            }));
    CK(cudaGetLastError());
    for (size_t v = 0; v < vars.size(); v++) {
        printf("  %-32s", vars[v].name.c_str());
        for (int r = 0; r < rounds; r++) printf(" %8.2f (%.3f)", res[v][r], res[v][r] / res[0][r]);
        printf("\n");
    }
    return 0;
}
