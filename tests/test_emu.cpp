/* test_emu.cpp - checks of the GPU emulator itself (src/gpu/vendor_emu.h,
 * emu_runtime.cpp), built only with KF_GPU=EMU: that cooperating kernels
 * get the answers a GPU gives (shuffles, __syncthreads, shared memory, a
 * grid of blocks, graph capture and replay), and that the kernel bugs it
 * exists to catch fail the launch with a message: lanes of a warp at
 * different shuffles, a shuffle beside an exited lane, threads at different
 * barriers, a misaligned 16-byte access. Also that its schedule differs
 * between blocks, so that a missing __syncthreads shows as wrong output.
 * And common.cuh's row-index helpers, compiled for the host here: a row
 * index split into (i0, i1, i2) of extents (s1, s2) by 32-bit, 64-bit and
 * multiply-high division gives back the row. With KFUSE_EMU_DEVICES=2, its
 * devices: each thread's current one, and a launch given memory of another
 * failing. */
#include <stdio.h>
#include <string.h>

#include "gpu/vendor_emu.h"
#include "gpu/common.cuh"

static int failures = 0, passes = 0;

static void expect(bool ok, const char *what)
{
    if (ok) {
        passes++;
    } else {
        failures++;
        printf("FAIL: %s\n", what);
    }
}

/* the launch's error: 0 if none, else its message must contain `needle` */
static void expect_fault(const char *needle, const char *what)
{
    kf_gpuError_t e = kf_gpuGetLastError();
    const char *msg = e == kf_gpuSuccess ? "" : kf_gpuGetErrorString(e);
    bool ok = e != kf_gpuSuccess && strstr(msg, needle) != NULL;
    if (!ok) printf("  (%s: error %d, \"%s\")\n", what, (int)e, msg);
    expect(ok, what);
}

static void expect_clean(const char *what)
{
    kf_gpuError_t e = kf_gpuGetLastError();
    if (e != kf_gpuSuccess) printf("  (%s: \"%s\")\n", what, kf_gpuGetErrorString(e));
    expect(e == kf_gpuSuccess, what);
}

struct sum_p {
    const float *x;
    float *out;  /* one per block */
    int n;       /* elements per block */
};

/* a block's sum: butterfly shuffles in each warp, warp partials through
 * shared memory, the first warp adds them */
static __global__ void block_sum(sum_p p)
{
    __shared__ float part[1024 / 16];
    const int t = (int)threadIdx.x, nt = (int)blockDim.x;
    float v = 0.0f;
    for (int i = t; i < p.n; i += nt) v += p.x[(size_t)blockIdx.x * p.n + i];
    for (int m = KF_WARP / 2; m > 0; m >>= 1) v += KF_SHFL_XOR(v, m);
    if (t % KF_WARP == 0) part[t / KF_WARP] = v;
    __syncthreads();
    if (t == 0) {
        float s = 0.0f;
        for (int w = 0; w < nt / KF_WARP; w++) s += part[w];
        p.out[blockIdx.x] = s;
    }
}

struct int_p {
    int *out;
    int arg;
};

/* lanes below arg shuffle, the others do not: divergence */
static __global__ void divergent_shuffle(int_p p)
{
    int v = (int)threadIdx.x;
    if ((int)threadIdx.x % KF_WARP < p.arg) v = KF_SHFL_XOR(v, 1);
    p.out[threadIdx.x] = v;
}

/* each lane reads lane (lane * 3 + arg) of its warp, an index that runs past
 * the warp width and below 0 (taken modulo the width, as on the hardware) */
static __global__ void indexed_shuffle(int_p p)
{
    const int lane = (int)threadIdx.x % KF_WARP;
    p.out[threadIdx.x] = KF_SHFL_IDX((int)threadIdx.x * 10, lane * 3 + p.arg);
}

/* threads of odd warps leave before the shuffle */
static __global__ void shuffle_after_exit(int_p p)
{
    if ((threadIdx.x / KF_WARP) % 2 == 1 && threadIdx.x % 2 == 1) return;
    p.out[threadIdx.x] = KF_SHFL_XOR((int)threadIdx.x, 1);
}

/* the first half of the block waits at a barrier of its own while the rest
 * wait at the common one */
static __global__ void uneven_barriers(int_p p)
{
    if ((int)threadIdx.x < (int)blockDim.x / 2) __syncthreads();
    __syncthreads();
    p.out[threadIdx.x] = 1;
}

/* a 16-byte load at a byte offset of arg */
static __global__ void misaligned_load(int_p p)
{
    const char *base = (const char *)p.out;
    uint4 v = kf_ld16_stream(reinterpret_cast<const uint4 *>(base + p.arg));
    p.out[64 + threadIdx.x] = (int)v.x;
}

/* warp 0 writes shared memory that the last warp reads with no barrier
 * between: the value read depends on which warp ran first */
static __global__ void missing_barrier(int_p p)
{
    __shared__ int cell;
    const int last = (int)blockDim.x / KF_WARP - 1;
    if (threadIdx.x == 0) cell = 1000 + (int)blockIdx.x;
    int seen = -1;
    if ((int)threadIdx.x == last * KF_WARP) seen = cell;
    if ((int)threadIdx.x == last * KF_WARP) p.out[blockIdx.x] = seen;
    __syncthreads();
    if (threadIdx.x == 0) cell = 0;
}

static void test_block_sum(void)
{
    const int blocks = 3, n = 1000, threads = 256;
    float *x = NULL, *out = NULL;
    kf_gpuMalloc((void **)&x, sizeof(float) * blocks * n);
    kf_gpuMalloc((void **)&out, sizeof(float) * blocks);
    double want[3] = {0, 0, 0};
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < n; i++) {
            x[b * n + i] = (float)((i * 7 + b * 3) % 11) - 5.0f;
            want[b] += x[b * n + i];
        }
    sum_p p = {x, out, n};
    kf_launch(block_sum, (unsigned)blocks, (unsigned)threads, 0, NULL, p);
    expect_clean("block_sum launches cleanly");
    for (int b = 0; b < blocks; b++) expect(out[b] == (float)want[b], "block_sum: each block's exact sum");

    /* the same launch captured into a graph: nothing runs until replayed */
    kf_gpuStream_t s = NULL;
    kf_gpuStreamCreateNonBlocking(&s);
    for (int b = 0; b < blocks; b++) out[b] = -1.0f;
    expect(kf_gpuStreamBeginCapture(s) == kf_gpuSuccess, "capture begins");
    kf_launch(block_sum, (unsigned)blocks, (unsigned)threads, 0, s, p);
    kf_gpuGraph_t g = NULL;
    kf_gpuGraphExec_t ge = NULL;
    expect(kf_gpuStreamEndCapture(s, &g) == kf_gpuSuccess, "capture ends");
    expect(out[0] == -1.0f, "a captured launch does not run");
    kf_gpuGraphInstantiate(&ge, g);
    kf_gpuGraphLaunch(ge, s);
    expect_clean("graph replay runs cleanly");
    expect(out[2] == (float)want[2], "graph replay computes the sum");
    kf_gpuGraphExecDestroy(ge);
    kf_gpuGraphDestroy(g);
    kf_gpuStreamDestroy(s);
    kf_gpuFree(x);
    kf_gpuFree(out);
}

static void test_faults(void)
{
    int *buf = NULL;
    kf_gpuMalloc((void **)&buf, sizeof(int) * 2048);
    int_p p = {buf, KF_WARP};
    kf_launch(divergent_shuffle, 1u, 128u, 0, NULL, p);
    expect_clean("a shuffle every lane takes is clean");
    expect(buf[0] == 1 && buf[1] == 0 && buf[127] == 126, "shuffle xor 1 swaps neighbours");
    p.arg = -5;
    kf_launch(indexed_shuffle, 1u, 128u, 0, NULL, p);
    expect_clean("an indexed shuffle is clean");
    bool idx_ok = true;
    for (int t = 0; t < 128; t++) {
        const int src = (t / KF_WARP) * KF_WARP + (((t % KF_WARP) * 3 - 5) & (KF_WARP - 1));
        idx_ok = idx_ok && buf[t] == src * 10;
    }
    expect(idx_ok, "an indexed shuffle reads lane index modulo the warp width");
    p.arg = KF_WARP / 2;
    kf_launch(divergent_shuffle, 1u, 128u, 0, NULL, p);
    expect_fault("shuffle", "a shuffle taken by half the warp fails the launch");

    kf_launch(shuffle_after_exit, 1u, 2u * KF_WARP, 0, NULL, p);
    expect_fault("exited", "a shuffle beside exited lanes fails the launch");

    kf_launch(uneven_barriers, 2u, 128u, 0, NULL, p);
    expect_fault("__syncthreads", "threads at different barriers fail the launch");

    p.arg = 16;
    kf_launch(misaligned_load, 1u, 32u, 0, NULL, p);
    expect_clean("an aligned 16-byte load is clean");
    p.arg = 8;
    kf_launch(misaligned_load, 1u, 32u, 0, NULL, p);
    expect_fault("misaligned 16-byte load", "a misaligned 16-byte load fails the launch");

    kf_launch(block_sum, 1u, 2048u, 0, NULL, sum_p{NULL, NULL, 0});
    expect_fault("invalid launch", "a block of 2048 threads is refused");
    kf_gpuFree(buf);
}

/* With KFUSE_EMU_DEVICES=2 (else skipped): each thread's current device, the
 * devices in use, and a launch given another device's memory failing */
static void test_devices(void)
{
    int count = 0;
    kf_gpuGetDeviceCount(&count);
    if (count < 2) return;
    int d = -1;
    expect(kf_gpuGetDevice(&d) == kf_gpuSuccess && d == 0, "device 0 is current at first");
    expect(kf_gpuSetDevice(count) != kf_gpuSuccess, "a device past the count is refused");
    int *buf = NULL;
    kf_gpuMalloc((void **)&buf, sizeof(int) * 256);          /* on device 0 */
    expect(kf_emu_device_in_use(0) && !kf_emu_device_in_use(1), "device 0 in use, 1 not yet");
    expect(kf_gpuSetDevice(1) == kf_gpuSuccess && kf_gpuGetDevice(&d) == kf_gpuSuccess && d == 1,
           "device 1 made current");
    expect(kf_emu_device_in_use(1), "a device made current is in use");
    int_p p = {buf, KF_WARP};
    kf_launch(divergent_shuffle, 1u, 128u, 0, NULL, p);
    expect_fault("memory of device 0", "a launch on device 1 given device 0's memory fails");
    kf_gpuSetDevice(0);
    kf_launch(divergent_shuffle, 1u, 128u, 0, NULL, p);
    expect_clean("the same launch on device 0 is clean");
    kf_gpuFree(buf);
}

static void test_schedule_differs(void)
{
    int *buf = NULL;
    kf_gpuMalloc((void **)&buf, sizeof(int) * 2);
    int_p p = {buf, 0};
    kf_launch(missing_barrier, 2u, 4u * KF_WARP, 0, NULL, p);
    expect_clean("missing_barrier runs");
    /* block 0 runs its warps in ascending order (the write is seen), block 1
     * descending (the last warp reads before warp 0 writes) */
    expect(buf[0] == 1000, "ascending block: the last warp sees warp 0's write");
    expect(buf[1] != 1001, "descending block: the last warp reads before warp 0 writes");
    kf_gpuFree(buf);
}

/* r = (i0 * s1 + i1) * s2 + i2 with 0 <= i1 < s1, 0 <= i2 < s2 */
static bool row_index_ok(kf_ridx x, int64_t r, int64_t s1, int64_t s2)
{
    if (x.i0 < 0 || x.i1 < 0 || x.i1 >= s1 || x.i2 < 0 || x.i2 >= s2) return false;
    unsigned __int128 back = ((unsigned __int128)x.i0 * (uint64_t)s1 + (uint64_t)x.i1) *
                             (uint64_t)s2 + (uint64_t)x.i2;
    return back == (unsigned __int128)r;
}

static void test_row_index(void)
{
    /* extents of 2^32 and more (tensors of >= 2^32 rows) with rows below
     * 2^32: the 32-bit branch once cut the extent there */
    const int64_t ext[][2] = {{1, 1},       {3, 5},       {7, 1},
                              {1, 7},       {1000, 333},  {65536, 65537},
                              {46341, 46341}, {2, (1ll << 32) + 5}, {(1ll << 32) + 3, 2},
                              {1, (1ll << 33) + 1}, {2147483647, 1}, {1, 2147483647}};
    int bad = 0, bad_fast = 0, n = 0, n_fast = 0;
    uint64_t lcg = 12345;
    for (const auto &e : ext) {
        const int64_t s1 = e[0], s2 = e[1];
        const int64_t probe[] = {0, 1, 2, 6, s2 - 1, s2, s2 + 1, s1 * s2 - 1, s1 * s2,
                                 s1 * s2 + 1, 3 * s1 * s2 + 2, 0x7fffffffll, 0xffffffffll,
                                 (1ll << 32), (1ll << 40) + 17};
        for (int k = 0; k < 15 + 2000; k++) {
            int64_t r;
            if (k < 15) {
                r = probe[k];
            } else {
                lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
                r = (int64_t)((lcg >> 11) % (k % 2 ? 0x80000000ull : (1ull << 41)));
            }
            if (r < 0) continue;
            n++;
            if (!row_index_ok(kf_row_index(r, s1, s2), r, s1, s2)) {
                if (bad++ < 3)
                    printf("  kf_row_index(%lld, %lld, %lld) wrong\n", (long long)r,
                           (long long)s1, (long long)s2);
            }
            if (r < (1ll << 31) && s1 < (1ll << 31) && s2 < (1ll << 31)) {
                n_fast++;
                kf_fdiv f1 = kf_fdiv_make((unsigned int)s1), f2 = kf_fdiv_make((unsigned int)s2);
                if (!row_index_ok(kf_row_index_f(r, f1, f2), r, s1, s2)) {
                    if (bad_fast++ < 3)
                        printf("  kf_row_index_f(%lld, %lld, %lld) wrong\n", (long long)r,
                               (long long)s1, (long long)s2);
                }
            }
        }
    }
    expect(bad == 0 && n > 20000, "kf_row_index gives back the row (extents to 2^33)");
    expect(bad_fast == 0 && n_fast > 5000, "kf_row_index_f gives back the row (below 2^31)");
}

int main(void)
{
    test_block_sum();
    test_faults();
    test_devices();
    test_schedule_differs();
    test_row_index();
    printf("test_emu (warp %d): %d passed, %d failed\n", KF_WARP, passes, failures);
    return failures ? 1 : 0;
}
