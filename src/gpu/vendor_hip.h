/* vendor_hip.h - the thin rename layer of the GPU backend for HIP (AMD): the
 * same kf_gpu* / KF_* names as vendor_cuda.h, mapped to hip* names. Works with
 * old HIP headers (no hip_bf16.h): bf16 is converted by bit manipulation with
 * round to nearest even. No logic lives here beyond those conversions. */
#ifndef KF_VENDOR_HIP_H
#define KF_VENDOR_HIP_H

#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#define KF_GPU_VENDOR "hip"
#define KF_GPU_IS_CUDA 0
#define KF_GPU_UNITS "CUs"

typedef hipError_t kf_gpuError_t;
typedef hipStream_t kf_gpuStream_t;
typedef hipEvent_t kf_gpuEvent_t;
typedef hipGraph_t kf_gpuGraph_t;
typedef hipGraphExec_t kf_gpuGraphExec_t;
typedef hipDeviceAttribute_t kf_gpuDeviceAttr_t;

#define kf_gpuSuccess hipSuccess
#define kf_gpuGetErrorString hipGetErrorString
#define kf_gpuGetLastError hipGetLastError
#define kf_gpuGetDeviceCount hipGetDeviceCount
#define kf_gpuSetDevice hipSetDevice
#define kf_gpuGetDevice hipGetDevice
#define kf_gpuDeviceGetAttribute hipDeviceGetAttribute
#define kf_gpuMemGetInfo hipMemGetInfo
#define kf_gpuMalloc hipMalloc
#define kf_gpuFree hipFree
#define kf_gpuMemcpyAsync hipMemcpyAsync
#define kf_gpuMemsetAsync hipMemsetAsync
#define kf_gpuStreamSynchronize hipStreamSynchronize
#define kf_gpuEventCreate hipEventCreate
#define kf_gpuEventDestroy hipEventDestroy
#define kf_gpuEventRecord hipEventRecord
#define kf_gpuEventSynchronize hipEventSynchronize
#define kf_gpuEventElapsedTime hipEventElapsedTime
#define kf_gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define kf_gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define kf_gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define kf_gpuStreamCreateNonBlocking(ps) hipStreamCreateWithFlags((ps), hipStreamNonBlocking)
#define kf_gpuStreamDestroy hipStreamDestroy
#define kf_gpuStreamBeginCapture(s) hipStreamBeginCapture((s), hipStreamCaptureModeThreadLocal)
#define kf_gpuStreamEndCapture hipStreamEndCapture
#define kf_gpuGraphInstantiate(pe, g) hipGraphInstantiateWithFlags((pe), (g), 0)
#define kf_gpuGraphLaunch hipGraphLaunch
#define kf_gpuGraphDestroy hipGraphDestroy
#define kf_gpuGraphExecDestroy hipGraphExecDestroy
#define kf_gpuFuncSetMaxDynamicSmem(fn, bytes) \
    hipFuncSetAttribute((const void *)(fn), hipFuncAttributeMaxDynamicSharedMemorySize, (int)(bytes))

#define KF_ATTR_SM_COUNT hipDeviceAttributeMultiprocessorCount
#define KF_ATTR_WARP_SIZE hipDeviceAttributeWarpSize
#define KF_ATTR_MAX_THREADS_BLOCK hipDeviceAttributeMaxThreadsPerBlock
#define KF_ATTR_MAX_THREADS_SM hipDeviceAttributeMaxThreadsPerMultiProcessor
#define KF_ATTR_SMEM_BLOCK hipDeviceAttributeMaxSharedMemoryPerBlock
#define KF_ATTR_SMEM_OPTIN hipDeviceAttributeSharedMemPerBlockOptin
#define KF_ATTR_L2 hipDeviceAttributeL2CacheSize
#define KF_ATTR_BUS_BITS hipDeviceAttributeMemoryBusWidth
#define KF_ATTR_MEM_CLOCK hipDeviceAttributeMemoryClockRate
#define KF_ATTR_CC_MAJOR hipDeviceAttributeComputeCapabilityMajor
#define KF_ATTR_CC_MINOR hipDeviceAttributeComputeCapabilityMinor

/* Wave width of the code being compiled: 64 on CDNA (gfx9), 32 on RDNA in
 * wave32 mode. The host pass never uses it (it reads ctx->facts.warp_size). */
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define KF_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define KF_WARP 64
#endif
#define KF_SHFL_XOR(v, m) __shfl_xor((v), (m))
#define KF_SHFL_IDX(v, i) __shfl((v), (i))
#define KF_OPAQUE(u) asm volatile("" : "+v"(u))
/* a pointer computed here, in full and unconditionally (vendor_cuda.h); a
 * 64-bit value in a register pair */
#define KF_ADDR_NOW(ptr) asm volatile("" : "+v"(ptr))
#define KF_LDG(p) (*(p))
/* a * b rounded on its own, never contracted into an FMA with a later add */
#define KF_FMUL_RN(a, b) __fmul_rn((a), (b))
/* no per-kernel register cap here: the 512-thread bound of the others */
#define KF_KERNEL_REGS_48 __launch_bounds__(512)
#define KF_KERNEL_REGS_40 __launch_bounds__(512)
#define KF_MIN_BLOCKS_256(m) (m)
/* threadIdx.x read afresh (see vendor_cuda.h; no register cap here) */
static __device__ __forceinline__ int kf_tid_x_fresh() { return (int)threadIdx.x; }
/* 16-byte load of activations read once, 16-byte store of an output never
 * read back: nontemporal (see vendor_cuda.h) */
typedef unsigned int kf_u32x4_t __attribute__((ext_vector_type(4)));
static __device__ __forceinline__ uint4 kf_ld16_stream(const uint4 *p)
{
    kf_u32x4_t w = __builtin_nontemporal_load(reinterpret_cast<const kf_u32x4_t *>(p));
    return make_uint4(w.x, w.y, w.z, w.w);
}
static __device__ __forceinline__ void kf_st16_stream(uint4 *p, uint4 v)
{
    kf_u32x4_t w = {v.x, v.y, v.z, v.w};
    __builtin_nontemporal_store(w, reinterpret_cast<kf_u32x4_t *>(p));
}
/* the same accesses default-cached (see vendor_cuda.h) */
static __device__ __forceinline__ uint4 kf_ld16_cached(const uint4 *p) { return *p; }
static __device__ __forceinline__ void kf_st16_cached(uint4 *p, uint4 v) { *p = v; }
#define KF_EXP2_FAST(x) exp2f(x)
#define KF_RCP_FAST(x) (1.0f / (x))

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
    return __uint_as_float(((unsigned int)b) << 16);
}
/* round to nearest even; NaN stays a (quiet) NaN, Inf stays Inf */
static __device__ __forceinline__ unsigned short kf_f32_to_bf16_bits(float f)
{
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

#include "vendor_pair16.h"

#endif /* KF_VENDOR_HIP_H */
