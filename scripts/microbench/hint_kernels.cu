// hint_kernels.cu - the microbenchmark's 16-byte copy kernel (ld.cs + st.cs or plain) as a
// shared library, so that hint_torch.py can launch it on PyTorch tensors and streams.
// Build: nvcc -O3 -arch=sm_90 -shared -Xcompiler -fPIC -o libhint.so hint_kernels.cu
#include "hint_common.cuh"

/* copies n16 16-byte chunks from a to b on `stream`; cs: 1 = ld.cs + st.cs, 0 = plain.
 * Returns the launch's cudaError_t. */
extern "C" int hint_copy(const void *a, void *b, size_t n16, int cs, void *stream)
{
    static int sms = 0; /* read once, not per timed call */
    if (!sms) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    dim3 grid(sms * 8), block(256);
    cudaStream_t st = (cudaStream_t)stream;
    if (cs) hint_copy_kernel<1><<<grid, block, 0, st>>>((const uint4 *)a, (uint4 *)b, n16);
    else hint_copy_kernel<0><<<grid, block, 0, st>>>((const uint4 *)a, (uint4 *)b, n16);
    return (int)cudaGetLastError();
}

/* fills bytes (a multiple of 4) at p with hashed random words; synchronous */
extern "C" int hint_fill(void *p, size_t bytes, unsigned seed)
{
    hint_fill_kernel<<<1024, 256>>>((unsigned *)p, bytes / 4, seed);
    return (int)cudaDeviceSynchronize();
}

/* device buffers outside PyTorch's allocator, for the allocation comparison */
extern "C" void *hint_malloc(size_t bytes)
{
    void *p = nullptr;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

extern "C" void hint_free(void *p) { cudaFree(p); }
