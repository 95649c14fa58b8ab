/* backend.cu - the GPU backend's entry points: kf_gpu_compiled, kf_gpu_init
 * (device selection, device facts read from the device, the ops table, the
 * description string, timing events) and the memory / sync / timing entries
 * of kf_backend_ops. Every op runs on (stream)ctx->stream. No allocation or
 * attribute query happens per op call: the facts are read once here. */
#include <stdio.h>
#include <stdlib.h>
#include "common.cuh"

typedef struct kf_gpu_state {
    kf_gpuEvent_t start, stop;
    int started;
    /* graph timing: the instantiated graph; while capturing, the stream the
     * context had (ctx->stream points at capture_stream then) */
    kf_gpuGraphExec_t graph;
    kf_gpuStream_t capture_stream;
    void *saved_stream;
    int capturing;
} kf_gpu_state;

__global__ void kf_empty_kernel(void) {}

/* The wave width the kernels were compiled for: KF_WARP (vendor_hip.h takes
 * 64 where the compiler does not say). */
__global__ void kf_warp_probe_kernel(int *warp) { *warp = KF_WARP; }

static kf_status kf_gpu_malloc(kf_ctx *ctx, size_t bytes, void **ptr)
{
    *ptr = NULL;
    if (bytes == 0) return KF_OK;
    kf_gpuError_t e = kf_gpuMalloc(ptr, bytes);
    if (e != kf_gpuSuccess) {
        *ptr = NULL;
        (void)kf_gpuGetLastError(); /* allocation errors are not sticky: clear it */
        return kf_set_error(ctx, KF_ERR_ALLOC, "malloc of %zu bytes on gpu %d: %s", bytes,
                            ctx->device, kf_gpuGetErrorString(e));
    }
    return KF_OK;
}

static kf_status kf_gpu_free(kf_ctx *ctx, void *ptr)
{
    if (!ptr) return KF_OK;
    return kf_gpu_check(ctx, kf_gpuFree(ptr), "free");
}

static kf_status kf_gpu_memcpy(kf_ctx *ctx, void *dst, const void *src, size_t bytes,
                               int to_device)
{
    if (bytes == 0) return KF_OK;
    kf_status s = kf_gpu_check(ctx,
                               kf_gpuMemcpyAsync(dst, src, bytes,
                                                 to_device ? kf_gpuMemcpyHostToDevice
                                                           : kf_gpuMemcpyDeviceToHost,
                                                 kf_stream(ctx)),
                               "memcpy");
    if (s != KF_OK) return s;
    return kf_gpu_check(ctx, kf_gpuStreamSynchronize(kf_stream(ctx)), "memcpy (synchronize)");
}

static kf_status kf_gpu_memset(kf_ctx *ctx, void *ptr, int value, size_t bytes)
{
    if (bytes == 0) return KF_OK;
    return kf_gpu_check(ctx, kf_gpuMemsetAsync(ptr, value, bytes, kf_stream(ctx)), "memset");
}

static kf_status kf_gpu_synchronize(kf_ctx *ctx)
{
    return kf_gpu_check(ctx, kf_gpuStreamSynchronize(kf_stream(ctx)), "synchronize");
}

static kf_status kf_gpu_copy_d2d(kf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return KF_OK;
    return kf_gpu_check(ctx,
                        kf_gpuMemcpyAsync(dst, src, bytes, kf_gpuMemcpyDeviceToDevice,
                                          kf_stream(ctx)),
                        "copy_d2d");
}

static kf_status kf_gpu_empty(kf_ctx *ctx)
{
    kf_launch(kf_empty_kernel, 1, 1, 0, kf_stream(ctx));
    return KF_LAUNCH_CHECK(ctx, "empty_kernel");
}

static kf_status kf_gpu_timer_start(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    kf_status st = kf_gpu_check(ctx, kf_gpuEventRecord(s->start, kf_stream(ctx)), "timer_start");
    if (st == KF_OK) s->started = 1;
    return st;
}

static kf_status kf_gpu_timer_stop(kf_ctx *ctx, double *elapsed_ms)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    *elapsed_ms = 0.0;
    if (!s->started)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "timer_stop: the timer was not started");
    s->started = 0;
    kf_status st = kf_gpu_check(ctx, kf_gpuEventRecord(s->stop, kf_stream(ctx)), "timer_stop");
    if (st != KF_OK) return st;
    st = kf_gpu_check(ctx, kf_gpuEventSynchronize(s->stop), "timer_stop (wait)");
    if (st != KF_OK) return st;
    float ms = 0.0f;
    st = kf_gpu_check(ctx, kf_gpuEventElapsedTime(&ms, s->start, s->stop), "timer_stop (elapsed)");
    if (st != KF_OK) return st;
    *elapsed_ms = (double)ms;
    return KF_OK;
}

/* kf_gpu_check that also clears the runtime's last error: a failed graph call
 * is reported here, not again by the next op's launch check */
static kf_status kf_gpu_graph_check(kf_ctx *ctx, kf_gpuError_t e, const char *what)
{
    kf_status st = kf_gpu_check(ctx, e, what);
    if (st != KF_OK) (void)kf_gpuGetLastError();
    return st;
}

/* end the capture under way: the context's stream back, the captured graph
 * in *g (NULL if none) */
static kf_gpuError_t kf_gpu_capture_stop(kf_ctx *ctx, kf_gpu_state *s, kf_gpuGraph_t *g)
{
    ctx->stream = s->saved_stream;
    s->capturing = 0;
    *g = NULL;
    return kf_gpuStreamEndCapture(s->capture_stream, g);
}

/* Graph capture runs on a stream of the backend's own (non-blocking, made on
 * first use): the context's stream may be the legacy default stream, which
 * cannot be captured. The ops issue on kf_stream(ctx), so ctx->stream points
 * at the capture stream until graph_end; the graph then replays on the
 * context's own stream, ordered with everything else issued there. */
static kf_status kf_gpu_graph_begin(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    if (s->capturing || s->graph)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "graph_begin: the context already holds a graph or a capture");
    if (!s->capture_stream) {
        kf_status st = kf_gpu_graph_check(ctx, kf_gpuStreamCreateNonBlocking(&s->capture_stream),
                                          "graph_begin (stream)");
        if (st != KF_OK) {
            s->capture_stream = NULL;
            return st;
        }
    }
    kf_status st = kf_gpu_graph_check(ctx, kf_gpuStreamBeginCapture(s->capture_stream),
                                      "graph_begin (capture)");
    if (st != KF_OK) return st;
    s->saved_stream = ctx->stream;
    ctx->stream = (void *)s->capture_stream;
    s->capturing = 1;
    return KF_OK;
}

static kf_status kf_gpu_graph_end(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    if (!s->capturing)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "graph_end: no capture under way");
    kf_gpuGraph_t g;
    kf_status st = kf_gpu_graph_check(ctx, kf_gpu_capture_stop(ctx, s, &g), "graph_end (capture)");
    if (st == KF_OK)
        st = kf_gpu_graph_check(ctx, kf_gpuGraphInstantiate(&s->graph, g),
                                "graph_end (instantiate)");
    if (st != KF_OK) s->graph = NULL;
    if (g) (void)kf_gpuGraphDestroy(g);
    return st;
}

static kf_status kf_gpu_graph_launch(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    if (!s->graph)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "graph_launch: no graph (graph_end first)");
    return kf_gpu_graph_check(ctx, kf_gpuGraphLaunch(s->graph, kf_stream(ctx)), "graph_launch");
}

static void kf_gpu_graph_free(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    if (!s) return;
    if (s->capturing) {                     /* a capture a failed call left open */
        kf_gpuGraph_t g;
        (void)kf_gpu_capture_stop(ctx, s, &g);
        if (g) (void)kf_gpuGraphDestroy(g);
        (void)kf_gpuGetLastError();         /* the failed capture's error is reported */
    }
    if (s->graph) (void)kf_gpuGraphExecDestroy(s->graph);
    s->graph = NULL;
}

static void kf_gpu_destroy(kf_ctx *ctx)
{
    kf_gpu_state *s = (kf_gpu_state *)ctx->backend_state;
    if (!s) return;
    kf_gpu_graph_free(ctx);
    if (s->capture_stream) (void)kf_gpuStreamDestroy(s->capture_stream);
    if (s->start) (void)kf_gpuEventDestroy(s->start);
    if (s->stop) (void)kf_gpuEventDestroy(s->stop);
    free(s);
    ctx->backend_state = NULL;
}

/* ---- the context's device -------------------------------------------------
 * kf_gpu_init and every entry of the ops table run on ctx->device whatever
 * device the calling thread has current (kernel launches, allocations and
 * streams belong to the current device), and leave the thread's current
 * device as they found it: a call through a context of another device makes
 * the context's device current for the call and the caller's again after.
 * One exception: a device whose primary context is not active (a thread that
 * never selected a device reads device 0, perhaps never used) is not made
 * current again, since that would create its context (hundreds of MB of
 * device memory); the context's device stays current then. */

/* Whether `device` has an active primary context; 1 where that cannot be
 * read (the caller's device is then put back, as for any other). */
static int kf_gpu_device_active(int device)
{
#if KF_GPU_IS_CUDA
    typedef CUresult (*get_state_fn)(CUdevice, unsigned int *, int *);
    static const get_state_fn get_state = []() -> get_state_fn {
#if CUDART_VERSION >= 12000
        void *fn = NULL;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                                         cudaEnableDefault, &found);
#else
        cudaError_t e = cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState", &fn,
                                                cudaEnableDefault, &found);
#endif
        if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        return (get_state_fn)fn;
#else
        return NULL;                /* before CUDA 12: the caller's device is put back */
#endif
    }();
    unsigned int flags = 0;
    int active = 1;
    if (get_state && get_state((CUdevice)device, &flags, &active) != CUDA_SUCCESS) active = 1;
    return active;
#elif defined(KF_GPU_EMU)
    return kf_emu_device_in_use(device);
#else
    unsigned int flags = 0;
    int active = 1;
    if (hipDevicePrimaryCtxGetState(device, &flags, &active) != hipSuccess) {
        (void)hipGetLastError();
        active = 1;
    }
    return active;
#endif
}

/* Make `device` current; *restore = the device to make current again after
 * (kf_gpu_device_leave), or -1 for none. `unusable`: the status when `device`
 * cannot be made current (KF_ERR_NO_DEVICE at context creation; KF_ERR_GPU in
 * a context's calls, where it is most often a sticky error of an earlier
 * launch there). */
static kf_status kf_gpu_device_enter(kf_ctx *ctx, int device, int *restore, kf_status unusable)
{
    *restore = -1;
    int current = 0;
    kf_gpuError_t e = kf_gpuGetDevice(&current);
    if (e != kf_gpuSuccess) {
        (void)kf_gpuGetLastError();
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: reading the current device: %s", device,
                            kf_gpuGetErrorString(e));
    }
    if (current == device) return KF_OK;
    e = kf_gpuSetDevice(device);
    if (e != kf_gpuSuccess) {
        (void)kf_gpuGetLastError();
        return kf_set_error(ctx, unusable, "gpu %d: cannot be made current: %s", device,
                            kf_gpuGetErrorString(e));
    }
    if (kf_gpu_device_active(current)) *restore = current;
    return KF_OK;
}

static void kf_gpu_device_leave(int restore)
{
    if (restore >= 0 && kf_gpuSetDevice(restore) != kf_gpuSuccess) (void)kf_gpuGetLastError();
}

/* KF_ON_DEVICE(f): f run between kf_gpu_device_enter and _leave on ctx->device,
 * for the ops table (f's arguments are the table entry's). */
template <typename Fn, Fn F> struct kf_on_device;
template <typename... A, kf_status (*F)(kf_ctx *, A...)>
struct kf_on_device<kf_status (*)(kf_ctx *, A...), F> {
    static kf_status call(kf_ctx *ctx, A... a)
    {
        int restore;
        kf_status s = kf_gpu_device_enter(ctx, ctx->device, &restore, KF_ERR_GPU);
        if (s != KF_OK) return s;
        s = F(ctx, a...);
        kf_gpu_device_leave(restore);
        return s;
    }
};
/* the void entries (graph_free, destroy) release what the context holds: they
 * run even where the device cannot be made current (a sticky error, the
 * runtime shutting down), and put back only what they switched */
template <void (*F)(kf_ctx *)> struct kf_on_device<void (*)(kf_ctx *), F> {
    static void call(kf_ctx *ctx)
    {
        int restore;
        const kf_status s = kf_gpu_device_enter(ctx, ctx->device, &restore, KF_ERR_GPU);
        F(ctx);
        if (s == KF_OK) kf_gpu_device_leave(restore);
    }
};
#define KF_ON_DEVICE(f) kf_on_device<decltype(&f), &f>::call

/* in the field order of kf_backend_ops (src/core/internal.h) */
static const kf_backend_ops kf_gpu_ops = {
    KF_ON_DEVICE(kf_gpu_rms_norm),
    KF_ON_DEVICE(kf_gpu_add_rms_norm),
    KF_ON_DEVICE(kf_gpu_layer_norm),
    KF_ON_DEVICE(kf_gpu_ada_norm),
    KF_ON_DEVICE(kf_gpu_add_ada_norm),
    KF_ON_DEVICE(kf_gpu_gated_residual),
    KF_ON_DEVICE(kf_gpu_rope),
    KF_ON_DEVICE(kf_gpu_rms_norm_rope),
    KF_ON_DEVICE(kf_gpu_glu),
    KF_ON_DEVICE(kf_gpu_activation),
    KF_ON_DEVICE(kf_gpu_softmax),
    KF_ON_DEVICE(kf_gpu_malloc),
    KF_ON_DEVICE(kf_gpu_free),
    KF_ON_DEVICE(kf_gpu_memcpy),
    KF_ON_DEVICE(kf_gpu_synchronize),
    KF_ON_DEVICE(kf_gpu_copy_d2d),
    KF_ON_DEVICE(kf_gpu_empty),
    KF_ON_DEVICE(kf_gpu_timer_start),
    KF_ON_DEVICE(kf_gpu_timer_stop),
    KF_ON_DEVICE(kf_gpu_memset),
    KF_ON_DEVICE(kf_gpu_graph_begin),
    KF_ON_DEVICE(kf_gpu_graph_end),
    KF_ON_DEVICE(kf_gpu_graph_launch),
    KF_ON_DEVICE(kf_gpu_graph_free),
    KF_ON_DEVICE(kf_gpu_destroy),
};

extern "C" int kf_gpu_compiled(void)
{
    return 1;
}

/* one attribute; a failed read is an error, never a guessed value */
static kf_status kf_attr(kf_ctx *ctx, int *out, kf_gpuDeviceAttr_t a, int device,
                         const char *what)
{
    *out = 0;
    kf_gpuError_t e = kf_gpuDeviceGetAttribute(out, a, device);
    if (e != kf_gpuSuccess)
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: reading %s: %s", device, what,
                            kf_gpuGetErrorString(e));
    return KF_OK;
}

#define KF_READ(field, attr, what)                                                   \
    do {                                                                             \
        kf_status s_ = kf_attr(ctx, &(field), (attr), device, (what));              \
        if (s_ != KF_OK) return s_;                                                  \
    } while (0)

static kf_status kf_gpu_read_facts(kf_ctx *ctx, int device)
{
    kf_device_facts *f = &ctx->facts;
    int smem = 0, smem_optin = 0, l2 = 0;
    memset(f, 0, sizeof(*f));
    KF_READ(f->arch_major, KF_ATTR_CC_MAJOR, "compute capability (major)");
    KF_READ(f->arch_minor, KF_ATTR_CC_MINOR, "compute capability (minor)");
    KF_READ(f->sm_count, KF_ATTR_SM_COUNT, "multiprocessor count");
    KF_READ(f->warp_size, KF_ATTR_WARP_SIZE, "warp size");
    KF_READ(f->max_threads_per_block, KF_ATTR_MAX_THREADS_BLOCK, "max threads per block");
    KF_READ(f->max_threads_per_sm, KF_ATTR_MAX_THREADS_SM, "max threads per multiprocessor");
    KF_READ(smem, KF_ATTR_SMEM_BLOCK, "shared memory per block");
    KF_READ(smem_optin, KF_ATTR_SMEM_OPTIN, "opt-in shared memory per block");
    KF_READ(l2, KF_ATTR_L2, "L2 cache size");
    KF_READ(f->mem_bus_bits, KF_ATTR_BUS_BITS, "memory bus width");
    KF_READ(f->mem_clock_khz, KF_ATTR_MEM_CLOCK, "memory clock rate");
    f->smem_per_block = (size_t)smem;
    f->smem_per_block_optin = (size_t)(smem_optin > smem ? smem_optin : smem);
    f->l2_bytes = (size_t)l2;
    f->peak_bandwidth_gbs = 2.0 * (f->mem_bus_bits / 8.0) * (f->mem_clock_khz * 1e3) / 1e9;

    size_t free_b = 0, total_b = 0;
    kf_gpuError_t e = kf_gpuMemGetInfo(&free_b, &total_b);
    if (e != kf_gpuSuccess)
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: reading memory size: %s", device,
                            kf_gpuGetErrorString(e));
    f->total_mem_bytes = total_b;

#if KF_GPU_IS_CUDA
    /* the name is not an attribute; device properties are read once here */
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess)
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: reading device properties: %s", device,
                            cudaGetErrorString(e));
    snprintf(f->name, sizeof(f->name), "%s", prop.name);
    snprintf(f->arch_name, sizeof(f->arch_name), "sm_%d%d", f->arch_major, f->arch_minor);
#elif defined(KF_GPU_EMU)
    snprintf(f->name, sizeof(f->name), "%s", kf_emu_device_name());
    snprintf(f->arch_name, sizeof(f->arch_name), "emu");
#else
    hipDeviceProp_t prop;
    e = hipGetDeviceProperties(&prop, device);
    if (e != hipSuccess)
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: reading device properties: %s", device,
                            hipGetErrorString(e));
    snprintf(f->name, sizeof(f->name), "%s", prop.name);
    /* "gfx90a:sramecc+:xnack-" -> "gfx90a" */
    {
        size_t i = 0;
        for (; i + 1 < sizeof(f->arch_name) && prop.gcnArchName[i] && prop.gcnArchName[i] != ':';
             i++)
            f->arch_name[i] = prop.gcnArchName[i];
        f->arch_name[i] = '\0';
    }
#endif
    if (f->warp_size != 32 && f->warp_size != 64)
        return kf_set_error(ctx, KF_ERR_NO_DEVICE, "gpu %d: unsupported warp size %d", device,
                            f->warp_size);
    if (f->max_threads_per_block < 512)
        return kf_set_error(ctx, KF_ERR_NO_DEVICE,
                            "gpu %d: blocks of 512 threads are needed, the device allows %d",
                            device, f->max_threads_per_block);
    return KF_OK;
}

/* The reductions split rows into groups planned from facts.warp_size and
 * shuffle within KF_WARP lanes: the two must agree, or sums are wrong. Read
 * the compiled width from the device once, at context creation. */
static kf_status kf_gpu_check_warp(kf_ctx *ctx)
{
    int *d_warp = NULL, compiled = 0;
    kf_status s = kf_gpu_malloc(ctx, sizeof(int), (void **)&d_warp);
    if (s != KF_OK) return s;
    kf_launch(kf_warp_probe_kernel, 1, 1, 0, kf_stream(ctx), d_warp);
    s = KF_LAUNCH_CHECK(ctx, "warp width probe");
    if (s == KF_OK) s = kf_gpu_memcpy(ctx, &compiled, d_warp, sizeof(int), 0);
    kf_status f = kf_gpu_free(ctx, d_warp);
    if (s != KF_OK) return s;
    if (f != KF_OK) return f;
    if (compiled != ctx->facts.warp_size)
        return kf_set_error(ctx, KF_ERR_NO_DEVICE,
                            "gpu %d: the kernels were compiled for a warp of %d lanes, the device "
                            "runs %d (the compiler did not give this target's wave width)",
                            ctx->device, compiled, ctx->facts.warp_size);
    return KF_OK;
}

extern "C" int kf_gpu_device_count(void)
{
    int count = 0;
    if (kf_gpuGetDeviceCount(&count) != kf_gpuSuccess) {
        (void)kf_gpuGetLastError();
        return 0;
    }
    return count > 0 ? count : 0;
}

/* kf_gpu_init's work, with `device` current */
static kf_status kf_gpu_init_on_device(kf_ctx *ctx, int device)
{
    kf_status s = kf_gpu_read_facts(ctx, device);
    if (s == KF_OK) s = kf_gpu_check_warp(ctx);
    if (s != KF_OK) return s;

    kf_gpu_state *st = (kf_gpu_state *)calloc(1, sizeof(kf_gpu_state));
    if (!st) return kf_set_error(ctx, KF_ERR_ALLOC, "gpu backend state: out of host memory");
    kf_gpuError_t e = kf_gpuEventCreate(&st->start);
    if (e == kf_gpuSuccess) e = kf_gpuEventCreate(&st->stop);
    if (e != kf_gpuSuccess) {
        if (st->start) (void)kf_gpuEventDestroy(st->start);
        free(st);
        return kf_set_error(ctx, KF_ERR_GPU, "gpu %d: creating timing events: %s", device,
                            kf_gpuGetErrorString(e));
    }
    ctx->backend_state = st;
    ctx->ops = &kf_gpu_ops;
    snprintf(ctx->describe, sizeof(ctx->describe), "gpu %d: %s, %s, %d %s, warp %d", device,
             ctx->facts.name, ctx->facts.arch_name, ctx->facts.sm_count,
             KF_GPU_UNITS, ctx->facts.warp_size);
    return KF_OK;
}

extern "C" kf_status kf_gpu_init(kf_ctx *ctx, int device)
{
    int count = 0;
    kf_gpuError_t e = kf_gpuGetDeviceCount(&count);
    if (e != kf_gpuSuccess) {
        (void)kf_gpuGetLastError();
        return kf_set_error(ctx, KF_ERR_NO_DEVICE, "no usable GPU: %s", kf_gpuGetErrorString(e));
    }
    if (count <= 0) return kf_set_error(ctx, KF_ERR_NO_DEVICE, "no GPU present");
    if (device < 0 || device >= count)
        return kf_set_error(ctx, KF_ERR_NO_DEVICE, "gpu %d requested, %d present", device, count);
    int restore;
    kf_status s = kf_gpu_device_enter(ctx, device, &restore, KF_ERR_NO_DEVICE);
    if (s != KF_OK) return s;
    ctx->device = device;
    s = kf_gpu_init_on_device(ctx, device);
    kf_gpu_device_leave(restore);
    return s;
}

