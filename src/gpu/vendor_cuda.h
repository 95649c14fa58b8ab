/* vendor_cuda.h - the thin rename layer of the GPU backend for CUDA: every
 * runtime call, type and intrinsic the kernels use is spelled kf_gpu* / KF_*
 * here and mapped to its CUDA name. vendor_hip.h maps the same names to HIP,
 * so the .cu files compile unchanged under nvcc and hipcc. No logic lives here. */
#ifndef KF_VENDOR_CUDA_H
#define KF_VENDOR_CUDA_H

#include <cuda.h> /* CUresult, CUdevice: backend.cu reads a primary context's state */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define KF_GPU_VENDOR "cuda"
#define KF_GPU_IS_CUDA 1
#define KF_GPU_UNITS "SMs" /* what the device calls its multiprocessors */

typedef cudaError_t kf_gpuError_t;
typedef cudaStream_t kf_gpuStream_t;
typedef cudaEvent_t kf_gpuEvent_t;
typedef cudaGraph_t kf_gpuGraph_t;
typedef cudaGraphExec_t kf_gpuGraphExec_t;
typedef cudaDeviceAttr kf_gpuDeviceAttr_t;

#define kf_gpuSuccess cudaSuccess
#define kf_gpuGetErrorString cudaGetErrorString
#define kf_gpuGetLastError cudaGetLastError
#define kf_gpuGetDeviceCount cudaGetDeviceCount
#define kf_gpuSetDevice cudaSetDevice
#define kf_gpuGetDevice cudaGetDevice
#define kf_gpuDeviceGetAttribute cudaDeviceGetAttribute
#define kf_gpuMemGetInfo cudaMemGetInfo
#define kf_gpuMalloc cudaMalloc
#define kf_gpuFree cudaFree
#define kf_gpuMemcpyAsync cudaMemcpyAsync
#define kf_gpuMemsetAsync cudaMemsetAsync
#define kf_gpuStreamSynchronize cudaStreamSynchronize
#define kf_gpuEventCreate cudaEventCreate
#define kf_gpuEventDestroy cudaEventDestroy
#define kf_gpuEventRecord cudaEventRecord
#define kf_gpuEventSynchronize cudaEventSynchronize
#define kf_gpuEventElapsedTime cudaEventElapsedTime
#define kf_gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define kf_gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define kf_gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define kf_gpuStreamCreateNonBlocking(ps) cudaStreamCreateWithFlags((ps), cudaStreamNonBlocking)
#define kf_gpuStreamDestroy cudaStreamDestroy
#define kf_gpuStreamBeginCapture(s) cudaStreamBeginCapture((s), cudaStreamCaptureModeThreadLocal)
#define kf_gpuStreamEndCapture cudaStreamEndCapture
#define kf_gpuGraphInstantiate(pe, g) cudaGraphInstantiateWithFlags((pe), (g), 0)
#define kf_gpuGraphLaunch cudaGraphLaunch
#define kf_gpuGraphDestroy cudaGraphDestroy
#define kf_gpuGraphExecDestroy cudaGraphExecDestroy
#define kf_gpuFuncSetMaxDynamicSmem(fn, bytes) \
    cudaFuncSetAttribute((const void *)(fn), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(bytes))

/* device attributes (kf_device_facts) */
#define KF_ATTR_SM_COUNT cudaDevAttrMultiProcessorCount
#define KF_ATTR_WARP_SIZE cudaDevAttrWarpSize
#define KF_ATTR_MAX_THREADS_BLOCK cudaDevAttrMaxThreadsPerBlock
#define KF_ATTR_MAX_THREADS_SM cudaDevAttrMaxThreadsPerMultiProcessor
#define KF_ATTR_SMEM_BLOCK cudaDevAttrMaxSharedMemoryPerBlock
#define KF_ATTR_SMEM_OPTIN cudaDevAttrMaxSharedMemoryPerBlockOptin
#define KF_ATTR_L2 cudaDevAttrL2CacheSize
#define KF_ATTR_BUS_BITS cudaDevAttrGlobalMemoryBusWidth
#define KF_ATTR_MEM_CLOCK cudaDevAttrMemoryClockRate
#define KF_ATTR_CC_MAJOR cudaDevAttrComputeCapabilityMajor
#define KF_ATTR_CC_MINOR cudaDevAttrComputeCapabilityMinor

/* warp width of the code being compiled: every NVIDIA GPU has 32 lanes.
 * Host code never uses this: it reads ctx->facts.warp_size. */
#define KF_WARP 32
#define KF_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
/* v of lane i of the warp (i taken modulo the warp width); every lane takes part */
#define KF_SHFL_IDX(v, i) __shfl_sync(0xffffffffu, (v), (i))
/* make the compiler forget what it knows about a 32-bit register value (so
 * that it keeps the packed value live, not a wider copy derived from it) */
#define KF_OPAQUE(u) asm volatile("" : "+r"(u))
/* a pointer computed here, in full and unconditionally (not sunk into the
 * predicated loads that use it), so that the parameters it is made from are
 * read before the first branch or test that would delay them */
#define KF_ADDR_NOW(ptr) asm volatile("" : "+l"(ptr))
/* read-only load (weights, tables, conditioning: never written by the kernel
 * that reads them), so the compiler may move it across the kernel's stores */
#define KF_LDG(p) __ldg(p)
/* a * b rounded on its own, never contracted into an FMA with a later add */
#define KF_FMUL_RN(a, b) __fmul_rn((a), (b))
/* 16-byte load of activations this kernel reads once, and 16-byte store of
 * an output it never reads back: ld/st.global.cs (cache streaming, evict
 * first), so the streamed rows do not push the parameters that the kernel
 * re-reads (weights, per-batch conditioning, tables) out of L1. H200,
 * ada_norm 2 x 8064 x 2048 bf16: 1.26 -> 1.15 x copy with both; either one
 * alone gained nothing. */
static __device__ __forceinline__ uint4 kf_ld16_stream(const uint4 *p) { return __ldcs(p); }
static __device__ __forceinline__ void kf_st16_stream(uint4 *p, uint4 v) { __stcs(p, v); }
/* the same accesses default-cached (ld / st.global with no cache operator:
 * LDG / STG.E.128; __ldca compiles to a strong LDG), for the kernels that
 * measured faster without the streaming hint (common.cuh kf_ld16_rows) */
static __device__ __forceinline__ uint4 kf_ld16_cached(const uint4 *p)
{
    uint4 v;
    asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}
static __device__ __forceinline__ void kf_st16_cached(uint4 *p, uint4 v)
{
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}
/* a kernel compiled for at most 48 registers per thread (any block size);
 * sm_80 code keeps the 64 of two 512-thread blocks per SM (the LayerNorm
 * kernel spills 20 bytes there under 48) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define KF_KERNEL_REGS_48 __launch_bounds__(512, 2)
#else
#define KF_KERNEL_REGS_48 __maxnreg__(48)
#endif
/* a kernel compiled for at most 40 registers per thread: six 256-thread
 * blocks per SM (sm_90; sm_80 keeps the 64 of two 512-thread blocks) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define KF_KERNEL_REGS_40 __launch_bounds__(512, 2)
#else
#define KF_KERNEL_REGS_40 __maxnreg__(40)
#endif
/* the minimum-blocks-per-SM argument of a 256-thread kernel's launch bounds:
 * sm_80 code keeps at most 4 (64 registers; the 40 of 6 blocks spill there) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define KF_MIN_BLOCKS_256(m) ((m) > 4 ? 4 : (m))
#else
#define KF_MIN_BLOCKS_256(m) (m)
#endif
/* threadIdx.x read afresh from %tid.x (volatile asm: neither the value nor
 * anything computed from it is kept live in a register across a loop) */
static __device__ __forceinline__ int kf_tid_x_fresh()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return (int)t;
}
/* 2^x and 1/x, hardware approximations (about 2 ulp) for the activations.
 * 2^x: the bare MUFU.EX2 (exp2f adds 3 instructions to keep denormal
 * results): results under 2^-126 flush to 0, which f16 outputs never see
 * but bf16 / f32 ones do at their far end (gelu_erf below x ~ -13.13 gives
 * 0 for a true |y| under ~1.4e-38). */
static __device__ __forceinline__ float kf_exp2_fast(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
#define KF_EXP2_FAST(x) kf_exp2_fast(x)
/* 1/x for x >= 1 (every caller's denominator: 1 + e^-x, 1 + c|x|, 2 + c|x|):
 * the bare MUFU.RCP (rcp.approx.ftz, about 1 ulp); past 2^126 it gives 0 (the
 * reciprocal flushed), as __fdividef does there. __fdividef(1, x) added four
 * instructions per call (a test, scaling and unscaling for a denormal x,
 * which never occurs here). */
static __device__ __forceinline__ float kf_rcp_fast(float x)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
#define KF_RCP_FAST(x) kf_rcp_fast(x)

/* 16-bit float storage <-> f32 (round to nearest even on the way down) */
static __device__ __forceinline__ float kf_f16_bits_to_f32(unsigned short b)
{
    return __half2float(__ushort_as_half(b));
}
static __device__ __forceinline__ unsigned short kf_f32_to_f16_bits(float f)
{
    return __half_as_ushort(__float2half_rn(f));
}
static __device__ __forceinline__ float kf_bf16_bits_to_f32(unsigned short b)
{
    return __bfloat162float(__ushort_as_bfloat16(b));
}
static __device__ __forceinline__ unsigned short kf_f32_to_bf16_bits(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* round(a * b) of two packed pairs of 16-bit floats: one correctly rounded
 * product per element, as the f32 product (exact for 16-bit inputs)
 * rounded once. bf16: an FMA with -0 (no bf16x2 multiply before sm_90;
 * -0 keeps the product's sign of zero). */
static __device__ __forceinline__ unsigned int kf_mul2_bf16(unsigned int a, unsigned int b)
{
    unsigned int r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    return r;
}
static __device__ __forceinline__ unsigned int kf_mul2_f16(unsigned int a, unsigned int b)
{
    unsigned int r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
/* round(a + b) of two packed pairs of 16-bit floats: one correctly rounded
 * sum per element, the same as the f32 sum rounded to 16 bits (that f32 sum
 * is exact, or its addend is too small to move it off the 16-bit value). bf16:
 * an FMA with 1 (no bf16x2 add before sm_90). */
static __device__ __forceinline__ unsigned int kf_add2_bf16(unsigned int a, unsigned int b)
{
    unsigned int r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(0x3f803f80u), "r"(b));
    return r;
}
static __device__ __forceinline__ unsigned int kf_add2_f16(unsigned int a, unsigned int b)
{
    unsigned int r;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

#endif /* KF_VENDOR_CUDA_H */
