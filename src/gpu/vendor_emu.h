/* vendor_emu.h - the rename layer of the GPU backend for the emulator: the
 * same kf_gpu* / KF_* names as vendor_cuda.h and vendor_hip.h, mapped to a
 * host runtime (emu_runtime.cpp) that runs the unchanged kernels of src/gpu
 * as plain C++ on the CPU. Each block's threads are fibers on one host
 * thread; a fiber gives way only at __syncthreads and at a shuffle, so the
 * kernels' warp and block cooperation behaves as on a GPU, one block after
 * another. It is a test instrument for machines without a GPU: it checks
 * the kernels' index math, launch geometry and reductions (at warp 32, or at
 * warp 64 as on AMD's CDNA, KF_EMU_WARP), every 16-byte access's alignment
 * and every shuffle's convergence; it says nothing about speed. Device
 * memory is host memory. */
#ifndef KF_VENDOR_EMU_H
#define KF_VENDOR_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "cpu/half.h"

#define KF_GPU_VENDOR "emu"
#define KF_GPU_IS_CUDA 0
#define KF_GPU_IS_EMU 1

#ifndef KF_EMU_WARP
#define KF_EMU_WARP 32
#endif
#define KF_WARP KF_EMU_WARP
#define KF_GPU_UNITS (KF_EMU_WARP == 32 ? "SMs" : "CUs")

/* ---- the CUDA C++ extensions the kernels are written in -------------------- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define KF_MIN_BLOCKS_256(m) (m)
#define __align__(n) __attribute__((aligned(n)))
/* one instance per function, shared by the fibers of the block that runs */
#define __shared__ static thread_local

struct kf_emu_dim3 {
    unsigned int x, y, z;
};
/* the running fiber's coordinates, set by the scheduler at every switch */
extern thread_local kf_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(8))) float2 { float x, y; };
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w)
{
    return uint4{x, y, z, w};
}

/* min / max over the usual arithmetic conversions, as CUDA's overloads */
template <typename A, typename B>
static inline typename std::common_type<A, B>::type min(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)a < (C)b ? (C)a : (C)b;
}
template <typename A, typename B>
static inline typename std::common_type<A, B>::type max(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)a > (C)b ? (C)a : (C)b;
}

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
/* glibc declares these two names itself: a macro, not a redefinition */
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
static inline unsigned int __umulhi(unsigned int a, unsigned int b)
{
    return (unsigned int)(((uint64_t)a * b) >> 32);
}
static inline unsigned int __float_as_uint(float f) { return kf_bits_of_f32(f); }
static inline float __uint_as_float(unsigned int u) { return kf_f32_of_bits(u); }
static inline float __int_as_float(int i) { return kf_f32_of_bits((uint32_t)i); }
static inline int __float_as_int(float f) { return (int)kf_bits_of_f32(f); }

/* ---- the runtime (emu_runtime.cpp) ------------------------------------------ */
typedef int kf_gpuError_t;
enum {
    kf_gpuSuccess = 0,
    kf_emu_err_invalid_value = 1,
    kf_emu_err_memory = 2,
    kf_emu_err_launch = 3,
    kf_emu_err_capture = 4,
    kf_emu_err_device = 5,
};
typedef struct kf_emu_stream *kf_gpuStream_t;
typedef struct kf_emu_event *kf_gpuEvent_t;
typedef struct kf_emu_graph *kf_gpuGraph_t;
typedef struct kf_emu_graph *kf_gpuGraphExec_t;
typedef int kf_gpuDeviceAttr_t;
enum {
    kf_gpuMemcpyHostToDevice = 1,
    kf_gpuMemcpyDeviceToHost = 2,
    kf_gpuMemcpyDeviceToDevice = 3,
};
enum {
    KF_ATTR_SM_COUNT,
    KF_ATTR_WARP_SIZE,
    KF_ATTR_MAX_THREADS_BLOCK,
    KF_ATTR_MAX_THREADS_SM,
    KF_ATTR_SMEM_BLOCK,
    KF_ATTR_SMEM_OPTIN,
    KF_ATTR_L2,
    KF_ATTR_BUS_BITS,
    KF_ATTR_MEM_CLOCK,
    KF_ATTR_CC_MAJOR,
    KF_ATTR_CC_MINOR,
};

const char *kf_gpuGetErrorString(kf_gpuError_t e);
kf_gpuError_t kf_gpuGetLastError(void);
kf_gpuError_t kf_gpuGetDeviceCount(int *count);
kf_gpuError_t kf_gpuSetDevice(int device);
kf_gpuError_t kf_gpuGetDevice(int *device);
kf_gpuError_t kf_gpuDeviceGetAttribute(int *value, kf_gpuDeviceAttr_t attr, int device);
kf_gpuError_t kf_gpuMemGetInfo(size_t *free_bytes, size_t *total_bytes);
kf_gpuError_t kf_gpuMalloc(void **ptr, size_t bytes);
kf_gpuError_t kf_gpuFree(void *ptr);
kf_gpuError_t kf_gpuMemcpyAsync(void *dst, const void *src, size_t bytes, int kind,
                                kf_gpuStream_t s);
kf_gpuError_t kf_gpuMemsetAsync(void *ptr, int value, size_t bytes, kf_gpuStream_t s);
kf_gpuError_t kf_gpuStreamSynchronize(kf_gpuStream_t s);
kf_gpuError_t kf_gpuEventCreate(kf_gpuEvent_t *e);
kf_gpuError_t kf_gpuEventDestroy(kf_gpuEvent_t e);
kf_gpuError_t kf_gpuEventRecord(kf_gpuEvent_t e, kf_gpuStream_t s);
kf_gpuError_t kf_gpuEventSynchronize(kf_gpuEvent_t e);
kf_gpuError_t kf_gpuEventElapsedTime(float *ms, kf_gpuEvent_t start, kf_gpuEvent_t stop);
kf_gpuError_t kf_gpuStreamCreateNonBlocking(kf_gpuStream_t *s);
kf_gpuError_t kf_gpuStreamDestroy(kf_gpuStream_t s);
kf_gpuError_t kf_gpuStreamBeginCapture(kf_gpuStream_t s);
kf_gpuError_t kf_gpuStreamEndCapture(kf_gpuStream_t s, kf_gpuGraph_t *g);
kf_gpuError_t kf_gpuGraphInstantiate(kf_gpuGraphExec_t *exec, kf_gpuGraph_t g);
kf_gpuError_t kf_gpuGraphLaunch(kf_gpuGraphExec_t exec, kf_gpuStream_t s);
kf_gpuError_t kf_gpuGraphDestroy(kf_gpuGraph_t g);
kf_gpuError_t kf_gpuGraphExecDestroy(kf_gpuGraphExec_t exec);
/* whether emulated device `device` is in use (backend.cu: a primary context's
 * state) */
bool kf_emu_device_in_use(int device);
/* the emulated device's name and architecture name (backend.cu) */
const char *kf_emu_device_name(void);

/* a launch: body() runs once per thread of every block, or is kept for a
 * graph when s is capturing */
typedef void (*kf_emu_body_fn)(void *closure);
void kf_emu_launch(kf_emu_body_fn body, void *closure, size_t closure_bytes,
                   unsigned int grid, unsigned int block, size_t smem, kf_gpuStream_t s);
/* the shuffle exchange of the running fiber: its value out, its partner's
 * (lane ^ mask) back; every lane of the warp must take part */
uint64_t kf_emu_shfl_xor_bits(uint64_t bits, int mask);
/* the same for an indexed shuffle: lane i's value (i modulo the warp width) */
uint64_t kf_emu_shfl_idx_bits(uint64_t bits, int i);
void kf_emu_syncthreads(void);
/* a fault (misaligned access): reported as the launch's error */
void kf_emu_fault(const char *what, const void *p, size_t align);

template <typename P>
struct kf_emu_call {
    void (*kernel)(P);
    P arg;
    static void run(void *c)
    {
        kf_emu_call *call = (kf_emu_call *)c;
        call->kernel(call->arg);
    }
};
/* kernel k on grid blocks of block threads: one parameter struct by value,
 * as every kernel of the backend takes; no parameter for an empty kernel */
template <typename P>
static inline void kf_launch(void (*k)(P), unsigned int grid, unsigned int block, size_t smem,
                             kf_gpuStream_t s, P arg)
{
    kf_emu_call<P> call = {k, arg};
    kf_emu_launch(&kf_emu_call<P>::run, &call, sizeof call, grid, block, smem, s);
}
static inline void kf_emu_run_empty(void *c) { (*(void (**)(void))c)(); }
static inline void kf_launch(void (*k)(void), unsigned int grid, unsigned int block, size_t smem,
                             kf_gpuStream_t s)
{
    kf_emu_launch(&kf_emu_run_empty, &k, sizeof k, grid, block, smem, s);
}

#define __syncthreads() kf_emu_syncthreads()

template <typename V>
static inline V kf_emu_shfl(V v, int m, uint64_t (*exchange)(uint64_t, int))
{
    static_assert(sizeof(V) <= 8, "shuffles move up to 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = exchange(bits, m);
    V r;
    memcpy(&r, &bits, sizeof r);
    return r;
}
#define KF_SHFL_XOR(v, m) kf_emu_shfl((v), (m), kf_emu_shfl_xor_bits)
#define KF_SHFL_IDX(v, i) kf_emu_shfl((v), (i), kf_emu_shfl_idx_bits)

#define KF_OPAQUE(u) asm volatile("" : "+r"(u))
#define KF_ADDR_NOW(ptr) asm volatile("" : "+r"(ptr))
/* every read-only load checked for its type's alignment, as the GPU faults */
/* (a misaligned access is recorded, then done bytewise so that the host
 * does not fault first: the launch fails at the fiber's next switch) */
template <typename T>
static inline T kf_emu_ldg(const T *p)
{
    T v;
    if ((uintptr_t)p % alignof(T)) kf_emu_fault("load", p, alignof(T));
    memcpy(&v, p, sizeof v);
    return v;
}
#define KF_LDG(p) kf_emu_ldg(p)
/* a * b rounded on its own (the emulator compiles without contraction) */
#define KF_FMUL_RN(a, b) ((a) * (b))
#define KF_KERNEL_REGS_48
#define KF_KERNEL_REGS_40
static inline int kf_tid_x_fresh() { return (int)threadIdx.x; }
static inline uint4 kf_ld16_stream(const uint4 *p)
{
    uint4 v;
    if ((uintptr_t)p % 16) kf_emu_fault("16-byte load", p, 16);
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void kf_st16_stream(uint4 *p, uint4 v)
{
    if ((uintptr_t)p % 16) kf_emu_fault("16-byte store", p, 16);
    memcpy(p, &v, sizeof v);
}
static inline uint4 kf_ld16_cached(const uint4 *p) { return kf_ld16_stream(p); }
static inline void kf_st16_cached(uint4 *p, uint4 v) { kf_st16_stream(p, v); }
#define KF_EXP2_FAST(x) exp2f(x)
#define KF_RCP_FAST(x) (1.0f / (x))

static inline float kf_f16_bits_to_f32(unsigned short b) { return kf_half_f16_to_f32(b); }
static inline unsigned short kf_f32_to_f16_bits(float f) { return kf_half_f32_to_f16(f); }
static inline float kf_bf16_bits_to_f32(unsigned short b) { return kf_half_bf16_to_f32(b); }
static inline unsigned short kf_f32_to_bf16_bits(float f) { return kf_half_f32_to_bf16(f); }

#include "vendor_pair16.h"

#endif /* KF_VENDOR_EMU_H */
