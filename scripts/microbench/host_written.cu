// host_written.cu - microbenchmark: does it matter how the memory a kernel reads was last
// written? On the H200, kfuse's streamed norm rows (ld/st.global.cs) read input sets written
// by cudaMemcpy from pageable host memory 3-4 % slower, for as long as they were timed, than
// the same sets once copied out and back on the device (BENCHMARKS.md, twenty-ninth set).
// Here: two rotating input sets of 128 MB, filled five ways at the same addresses (a fill
// kernel; cudaMemcpy from pageable host memory; from pinned host memory; from pageable
// memory and then read once by a device copy; uploaded to a scratch buffer and copied into
// place on the device), each then read by copy kernels of the row kernels' shape (4 chunks
// of 16 bytes per thread, .cs or plain loads and stores) and by cudaMemcpyAsync into a
// device-written output, timed as one replay of a graph of 30 calls, median of 10 samples,
// rounds interleaved. Prints us per call and the ratio to the kernel-filled sets.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o host_written host_written.cu
#include <cstring>
#include <string>
#include "hint_common.cuh"

template <int CS>
__global__ void __launch_bounds__(256) copy_block4(const uint4 *__restrict__ a, uint4 *__restrict__ b, size_t n)
{
    const size_t base = (size_t)blockIdx.x * 4 * 256 + threadIdx.x;
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (base + 256 * k < n) v[k] = CS ? __ldcs(a + base + 256 * k) : a[base + 256 * k];
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (base + 256 * k < n) {
            if (CS) __stcs(b + base + 256 * k, v[k]);
            else b[base + 256 * k] = v[k];
        }
}

enum fill_mode { FILL_KERNEL, FILL_H2D_PAGEABLE, FILL_H2D_PINNED, FILL_H2D_THEN_READ, FILL_VIA_D2D, FILL_MODES };
static const char *fill_name[FILL_MODES] = {"fill kernel", "h2d pageable", "h2d pinned",
                                            "h2d pageable, then d2d-read", "h2d to scratch, d2d into place"};

// fill input set `in` (n bytes) the given way; host / pinned hold n random bytes
static void fill(fill_mode m, char *in, size_t n, const char *host, const char *pinned, char *scratch,
                 unsigned seed)
{
    switch (m) {
    case FILL_KERNEL: hint_fill_kernel<<<1024, 256>>>((unsigned *)in, n / 4, seed); break;
    case FILL_H2D_PAGEABLE: CK(cudaMemcpy(in, host, n, cudaMemcpyHostToDevice)); break;
    case FILL_H2D_PINNED: CK(cudaMemcpy(in, pinned, n, cudaMemcpyHostToDevice)); break;
    case FILL_H2D_THEN_READ:
        CK(cudaMemcpy(in, host, n, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(scratch, in, n, cudaMemcpyDeviceToDevice));
        break;
    default:
        CK(cudaMemcpy(scratch, host, n, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(in, scratch, n, cudaMemcpyDeviceToDevice));
        break;
    }
    CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 2;
    const size_t n = (size_t)128 << 20;
    const int sets = 2, reps = 30;
    char *arena, *scratch, *pinned;
    CK(cudaMalloc(&arena, 2 * n * sets));          // set s: input at 2 n s, output after it
    CK(cudaMalloc(&scratch, n));
    CK(cudaMallocHost(&pinned, n));
    char *host = (char *)malloc(n);
    unsigned x = 12345u;
    for (size_t i = 0; i < n; i += 4) {            // xorshift32 random bytes
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        memcpy(host + i, &x, 4);
    }
    memcpy(pinned, host, n);
    for (int s = 0; s < sets; s++)                 // outputs: device-written
        hint_fill_kernel<<<1024, 256>>>((unsigned *)(arena + 2 * n * s + n), n / 4, 99u + s);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const char *kname[3] = {"block4 ld.cs st.cs", "block4 plain", "memcpy"};
    float us[FILL_MODES][3][8];
    for (int r = 0; r < rounds && r < 8; r++)
        for (int m = 0; m < FILL_MODES; m++) {
            for (int s = 0; s < sets; s++)
                fill((fill_mode)m, arena + 2 * n * s, n, host, pinned, scratch, 7u + s);
            for (int k = 0; k < 3; k++)
                us[m][k][r] = graph_us_per_call(st, reps, 13, 3, [&](cudaStream_t sm) {
                    for (int i = 0; i < reps; i++) {
                        const uint4 *a = (const uint4 *)(arena + 2 * n * (i % sets));
                        uint4 *b = (uint4 *)(arena + 2 * n * (i % sets) + n);
                        if (k == 0) copy_block4<1><<<(unsigned)(n / 16 / 1024), 256, 0, sm>>>(a, b, n / 16);
                        else if (k == 1) copy_block4<0><<<(unsigned)(n / 16 / 1024), 256, 0, sm>>>(a, b, n / 16);
                        else cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, sm);
                    }
                });
        }
    printf("128 MB read + 128 MB written per call, two rotating sets; us per call (ratio to the fill kernel's sets), rounds:\n");
    for (int k = 0; k < 3; k++) {
        printf("%s\n", kname[k]);
        for (int m = 0; m < FILL_MODES; m++) {
            printf("  %-32s", fill_name[m]);
            for (int r = 0; r < rounds && r < 8; r++) printf(" %8.2f (%.3f)", us[m][k][r], us[m][k][r] / us[0][k][r]);
            printf("\n");
        }
    }
    CK(cudaGetLastError());
    free(host);
    return 0;
}
