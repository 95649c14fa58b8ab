/* emu_runtime.cpp - the host runtime behind vendor_emu.h: an emulated GPU
 * that runs the GPU backend's kernels on the CPU for tests. Memory is host
 * memory, every stream is synchronous (a launch has finished when it
 * returns), a captured graph is the list of its launches and copies.
 *
 * A launch runs its blocks one after another on the calling thread. A
 * block's threads are fibers (own stacks, switched by hand), each run until it reaches a
 * __syncthreads or a shuffle or ends. A warp whose lanes all wait at the
 * same shuffle is released at once and runs on (run_block says in what
 * order); when every thread waits at the same __syncthreads, the block is
 * released. Anything else is a kernel bug that a GPU would hang on or
 * compute garbage from, and fails the launch with a message: lanes of one
 * warp at different shuffles, a shuffle beside a barrier or an exited lane,
 * threads of a block at different barriers (by count or call site). A misaligned access through
 * KF_LDG or a 16-byte row access fails it as a GPU faults.
 *
 * The device it presents: KFUSE_EMU_SMS multiprocessors (default 132, the
 * H200's, so that launch geometry is chosen as there), 2048 threads each,
 * blocks of up to 1024, warp KF_EMU_WARP, 228 KiB shared memory, 50 MiB L2;
 * KFUSE_EMU_DEVICES of them (default 1, at most 8). Each thread has a current
 * device (0 at first); a device is in use (its primary context active, as
 * CUDA has it) once it was made current or given memory or a launch. Memory
 * remembers the device current at its allocation, and a launch whose
 * parameters hold a pointer into another device's memory fails, as a GPU
 * without peer access faults on it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(__x86_64__)
#include <ucontext.h> /* the fiber switch elsewhere */
#endif

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "gpu/vendor_emu.h"

thread_local kf_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

const int kMaxBlock = 1024;
const size_t kStackBytes = 256 * 1024;

enum FiberState { RUNNABLE, AT_SHUFFLE, AT_BARRIER, EXITED };

/* ---- fiber contexts: a hand-written switch on x86-64 (glibc's swapcontext
 * makes a system call per switch for the signal mask, which doubled the
 * suite's time), ucontext elsewhere */
#if defined(__x86_64__)
struct Context {
    void *sp;
};
extern "C" void kf_emu_switch(void **save_sp, void *load_sp);
/* callee-saved registers onto the old stack, stack pointers exchanged,
 * callee-saved registers off the new stack, return into it */
asm(".text\n"
    ".globl kf_emu_switch\n"
    ".hidden kf_emu_switch\n"
    ".type kf_emu_switch, @function\n"
    "kf_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size kf_emu_switch, .-kf_emu_switch\n");
void switch_context(Context *from, Context *to) { kf_emu_switch(&from->sp, to->sp); }
/* a context that starts entry() on the given stack: the six registers the
 * switch pops, then entry's address for its ret, then a slot that leaves the
 * stack pointer as a call would (8 below a 16-byte boundary) */
void make_context(Context *c, char *stack, size_t bytes, void (*entry)())
{
    uintptr_t top = ((uintptr_t)(stack + bytes)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++) *--sp = NULL;
    c->sp = sp;
}
#else
struct Context {
    ucontext_t uc;
};
void switch_context(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }
void make_context(Context *c, char *stack, size_t bytes, void (*entry)())
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = bytes;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif

struct Fiber {
    Context ctx;
    FiberState state;
    unsigned long shuffles, barriers; /* how many this thread has passed */
    const void *barrier_site;         /* where its last __syncthreads was called */
};

struct Scheduler {
    Context home;
    std::vector<Fiber> fibers;
    std::vector<char *> stacks;
    int running;
    unsigned int nthreads;
    kf_emu_body_fn body;
    void *closure;
    uint64_t slot[2][kMaxBlock];      /* shuffle values, by parity of the shuffle */
    char failure[256];                /* the first fault or divergence, if any */
    ~Scheduler()
    {
        for (char *stack : stacks) free(stack);
    }
};

thread_local Scheduler sched;
thread_local kf_gpuError_t last_error = kf_gpuSuccess;
thread_local char last_message[320];

void set_coordinates(unsigned int t)
{
    threadIdx.x = t;
    threadIdx.y = 0;
    threadIdx.z = 0;
}

void fail(const char *msg)
{
    if (!sched.failure[0]) snprintf(sched.failure, sizeof sched.failure, "%s", msg);
}

/* Under AddressSanitizer (make test-emu builds one) every stack switch is
 * announced through its fiber interface, so that it checks the kernels'
 * accesses to device buffers (host heap here) as compute-sanitizer's
 * memcheck does on a GPU. */
#if defined(__SANITIZE_ADDRESS__)
thread_local const void *asan_home_bottom;
thread_local size_t asan_home_size;
#endif

/* scheduler -> fiber t, back when it gives way */
void enter_fiber(unsigned int t)
{
#if defined(__SANITIZE_ADDRESS__)
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, sched.stacks[t], kStackBytes);
#endif
    switch_context(&sched.home, &sched.fibers[t].ctx);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* the running fiber -> scheduler; returns when released (never if it ended) */
void leave_fiber(FiberState s)
{
    Fiber &f = sched.fibers[sched.running];
    f.state = s;
#if defined(__SANITIZE_ADDRESS__)
    void *fake = NULL;
    __sanitizer_start_switch_fiber(s == EXITED ? NULL : &fake, asan_home_bottom, asan_home_size);
#endif
    switch_context(&f.ctx, &sched.home);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, &asan_home_bottom, &asan_home_size);
#endif
}

void fiber_entry()
{
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(NULL, &asan_home_bottom, &asan_home_size);
#endif
    sched.body(sched.closure);
    leave_fiber(EXITED);
}

/* Lanes w0 .. w1-1 (one warp) have run until each waits or has exited. If
 * they wait at one shuffle, release them (true). Lanes split between a
 * shuffle and anything else, or at different shuffles, are a divergence:
 * recorded, false. */
bool release_warp(unsigned int w0, unsigned int w1)
{
    unsigned int at_shuffle = 0;
    for (unsigned int t = w0; t < w1; t++) at_shuffle += sched.fibers[t].state == AT_SHUFFLE;
    if (!at_shuffle) return false;
    char msg[200];
    if (at_shuffle != w1 - w0) {
        snprintf(msg, sizeof msg,
                 "warp of threads %u..%u: %u lanes at a shuffle, the others exited or at a "
                 "barrier", w0, w1 - 1, at_shuffle);
        fail(msg);
        return false;
    }
    for (unsigned int t = w0; t < w1; t++)
        if (sched.fibers[t].shuffles != sched.fibers[w0].shuffles) {
            snprintf(msg, sizeof msg, "warp of threads %u..%u: lanes at different shuffles", w0,
                     w1 - 1);
            fail(msg);
            return false;
        }
    for (unsigned int t = w0; t < w1; t++) sched.fibers[t].state = RUNNABLE;
    return true;
}

/* Every thread waits at a barrier or has exited: release the barrier (true),
 * or record why not (false) */
bool release_block(void)
{
    unsigned long count = 0;
    const void *site = NULL;
    bool first = true, any = false;
    for (unsigned int t = 0; t < sched.nthreads; t++) {
        const Fiber &f = sched.fibers[t];
        if (f.state == EXITED) continue;
        if (f.state != AT_BARRIER) {
            fail("a thread waits at a shuffle while others wait at __syncthreads");
            return false;
        }
        if (first) count = f.barriers, site = f.barrier_site, first = false;
        if (f.barriers != count || f.barrier_site != site) {
            fail("threads of a block at different __syncthreads");
            return false;
        }
    }
    for (unsigned int t = 0; t < sched.nthreads; t++)
        if (sched.fibers[t].state == AT_BARRIER) {
            sched.fibers[t].state = RUNNABLE;
            any = true;
        }
    return any;
}

/* One block, every thread's fiber run to its end. The schedule is one a GPU
 * may take and the one most likely to expose a missing __syncthreads: each
 * warp runs as far as it can (through its shuffles, up to a barrier or its
 * end) before the next starts, in ascending warp order in even blocks and
 * descending in odd ones. */
bool run_block(unsigned int nthreads, bool descending)
{
    const unsigned int W = KF_EMU_WARP;
    sched.nthreads = nthreads;
    if (sched.fibers.size() < nthreads) sched.fibers.resize(nthreads);
    while (sched.stacks.size() < nthreads) {
        char *stack = (char *)malloc(kStackBytes);
        if (!stack) {
            fail("out of host memory for fiber stacks");
            return false;
        }
        sched.stacks.push_back(stack);
    }
    for (unsigned int t = 0; t < nthreads; t++) {
        Fiber &f = sched.fibers[t];
        f.state = RUNNABLE;
        f.shuffles = f.barriers = 0;
#if defined(__SANITIZE_ADDRESS__)
        /* a fiber of a failed launch was abandoned mid-kernel: the redzones
         * of its frames are still marked on this stack */
        __asan_unpoison_memory_region(sched.stacks[t], kStackBytes);
#endif
        make_context(&f.ctx, sched.stacks[t], kStackBytes, fiber_entry);
    }
    const unsigned int nwarps = (nthreads + W - 1) / W;
    for (;;) {
        for (unsigned int i = 0; i < nwarps; i++) {
            const unsigned int w = descending ? nwarps - 1 - i : i;
            const unsigned int w0 = w * W, w1 = w0 + W < nthreads ? w0 + W : nthreads;
            do {
                for (unsigned int t = w0; t < w1; t++) {
                    if (sched.fibers[t].state != RUNNABLE) continue;
                    sched.running = (int)t;
                    set_coordinates(t);
                    enter_fiber(t);
                    if (sched.failure[0]) return false;
                }
            } while (release_warp(w0, w1));
            if (sched.failure[0]) return false;
        }
        bool left = false;
        for (unsigned int t = 0; t < nthreads; t++) left |= sched.fibers[t].state != EXITED;
        if (!left) return true;
        if (!release_block()) return false;
    }
}

void set_error(kf_gpuError_t e, const char *msg)
{
    if (last_error == kf_gpuSuccess) {
        last_error = e;
        snprintf(last_message, sizeof last_message, "%s", msg);
    }
}

/* ---- devices ---- */

const int kMaxDevices = 8;
thread_local int current_device = 0;
std::atomic<bool> device_in_use[kMaxDevices];
std::mutex memory_lock;
std::map<uintptr_t, std::pair<uintptr_t, int>> memory_device; /* begin -> (end, device) */

int device_count(void)
{
    static const int count = [] {
        const char *s = getenv("KFUSE_EMU_DEVICES");
        const int n = s && *s ? atoi(s) : 1;
        return n < 1 ? 1 : n > kMaxDevices ? kMaxDevices : n;
    }();
    return count;
}

/* the device whose allocation holds address p, or -1 */
int device_of(uintptr_t p)
{
    std::lock_guard<std::mutex> hold(memory_lock);
    auto it = memory_device.upper_bound(p);
    if (it == memory_device.begin()) return -1;
    --it;
    return p < it->second.first ? it->second.second : -1;
}

/* a launch's parameters hold no pointer into memory of a device other than the
 * current one (every 8-byte word of them is looked up) */
bool launch_on_its_device(const void *closure, size_t closure_bytes)
{
    if (device_count() == 1) return true;
    for (size_t off = 0; off + sizeof(uintptr_t) <= closure_bytes; off += sizeof(uintptr_t)) {
        uintptr_t word;
        memcpy(&word, (const unsigned char *)closure + off, sizeof word);
        const int d = device_of(word);
        if (d >= 0 && d != current_device) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "launch on device %d given memory of device %d (%p): no peer access",
                     current_device, d, (void *)word);
            set_error(kf_emu_err_launch, msg);
            return false;
        }
    }
    return true;
}

/* ---- streams, events, graphs ---- */

struct Op {
    int kind;                         /* 0 launch, 1 copy, 2 set */
    kf_emu_body_fn body;
    std::vector<unsigned char> closure;
    unsigned int grid, block;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
};

}  /* namespace */

struct kf_emu_stream {
    bool capturing;
    std::vector<Op> captured;
};
struct kf_emu_event {
    double seconds;
};
struct kf_emu_graph {
    std::vector<Op> ops;
};

namespace {

void run_launch(kf_emu_body_fn body, void *closure, unsigned int grid, unsigned int block)
{
    sched.body = body;
    sched.closure = closure;
    sched.failure[0] = '\0';
    gridDim = kf_emu_dim3{grid, 1, 1};
    blockDim = kf_emu_dim3{block, 1, 1};
    for (unsigned int b = 0; b < grid; b++) {
        blockIdx = kf_emu_dim3{b, 0, 0};
        if (!run_block(block, (b & 1) != 0)) {
            char msg[320];
            snprintf(msg, sizeof msg, "kernel fault in block %u of %u (%u threads): %s", b, grid,
                     block, sched.failure);
            set_error(kf_emu_err_launch, msg);
            return;
        }
    }
}

void run_op(Op &op)
{
    if (op.kind == 0) run_launch(op.body, op.closure.data(), op.grid, op.block);
    else if (op.kind == 1) memmove(op.dst, op.src, op.bytes);
    else memset(op.dst, op.value, op.bytes);
}

void issue(kf_gpuStream_t s, Op &op)
{
    if (s && s->capturing) s->captured.push_back(op);
    else run_op(op);
}

double now_seconds()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

}  /* namespace */

void kf_emu_launch(kf_emu_body_fn body, void *closure, size_t closure_bytes, unsigned int grid,
                   unsigned int block, size_t smem, kf_gpuStream_t s)
{
    if (grid == 0 || block == 0 || block > (unsigned int)kMaxBlock || smem > 228 * 1024) {
        char msg[160];
        snprintf(msg, sizeof msg, "invalid launch: %u blocks of %u threads, %zu bytes shared",
                 grid, block, smem);
        set_error(kf_emu_err_launch, msg);
        return;
    }
    if (!launch_on_its_device(closure, closure_bytes)) return;
    device_in_use[current_device] = true;
    Op op = {};
    op.kind = 0;
    op.body = body;
    op.closure.assign((unsigned char *)closure, (unsigned char *)closure + closure_bytes);
    op.grid = grid;
    op.block = block;
    issue(s, op);
}

namespace {

/* one shuffle of the running fiber: its value out, lane src's of its warp
 * back once every lane has arrived (what == "xor" / "idx", arg: the mask or
 * index, for the message) */
uint64_t shuffle_exchange(uint64_t bits, unsigned int src_lane, bool bad, const char *what,
                          int arg)
{
    const unsigned int t = (unsigned int)sched.running;
    Fiber &f = sched.fibers[t];
    const int parity = (int)(f.shuffles & 1);
    sched.slot[parity][t] = bits;
    f.shuffles++;
    leave_fiber(AT_SHUFFLE);
    const unsigned int W = KF_EMU_WARP, lane = t % W;
    const unsigned int partner = t - lane + src_lane;
    if (bad || partner >= sched.nthreads) {
        char msg[120];
        snprintf(msg, sizeof msg, "shuffle %s %d from thread %u reads past the block", what, arg,
                 t);
        fail(msg);
        return 0;
    }
    return sched.slot[parity][partner];
}

}  /* namespace */

uint64_t kf_emu_shfl_xor_bits(uint64_t bits, int mask)
{
    const unsigned int W = KF_EMU_WARP, lane = (unsigned int)sched.running % W;
    return shuffle_exchange(bits, lane ^ ((unsigned int)mask & (W - 1)),
                            (unsigned int)mask >= W, "xor", mask);
}

/* the hardware takes the index modulo the warp width (its low bits) */
uint64_t kf_emu_shfl_idx_bits(uint64_t bits, int i)
{
    return shuffle_exchange(bits, (unsigned int)i & (KF_EMU_WARP - 1u), false, "idx", i);
}

/* (out of line, so that its return address names the call site: threads
 * that wait at two different __syncthreads are a divergence even when they
 * have passed as many) */
__attribute__((noinline)) void kf_emu_syncthreads(void)
{
    Fiber &f = sched.fibers[sched.running];
    f.barriers++;
    f.barrier_site = __builtin_return_address(0);
    leave_fiber(AT_BARRIER);
}

void kf_emu_fault(const char *what, const void *p, size_t align)
{
    char msg[160];
    snprintf(msg, sizeof msg, "misaligned %s at %p (needs %zu bytes), thread %u", what, p, align,
             threadIdx.x);
    fail(msg);
}

const char *kf_gpuGetErrorString(kf_gpuError_t e)
{
    switch (e) {
    case kf_gpuSuccess: return "no error";
    case kf_emu_err_invalid_value: return "invalid value";
    case kf_emu_err_memory: return "out of memory";
    case kf_emu_err_capture: return "stream capture error";
    case kf_emu_err_device: return "invalid device";
    default: return last_message[0] ? last_message : "kernel launch failed";
    }
}

kf_gpuError_t kf_gpuGetLastError(void)
{
    kf_gpuError_t e = last_error;
    last_error = kf_gpuSuccess;
    return e;
}

kf_gpuError_t kf_gpuGetDeviceCount(int *count)
{
    *count = device_count();
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return kf_emu_err_device;
    current_device = device;
    device_in_use[device] = true;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuGetDevice(int *device)
{
    *device = current_device;
    return kf_gpuSuccess;
}

bool kf_emu_device_in_use(int device)
{
    return device >= 0 && device < device_count() && device_in_use[device];
}

static int emu_sm_count(void)
{
    const char *s = getenv("KFUSE_EMU_SMS");
    if (!s || !*s) return 132;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return (*end == '\0' && v >= 1 && v <= 4096) ? (int)v : -1;
}

kf_gpuError_t kf_gpuDeviceGetAttribute(int *value, kf_gpuDeviceAttr_t attr, int device)
{
    if (device < 0 || device >= device_count()) return kf_emu_err_device;
    switch (attr) {
    case KF_ATTR_SM_COUNT:
        *value = emu_sm_count();
        return *value > 0 ? kf_gpuSuccess : kf_emu_err_invalid_value;
    case KF_ATTR_WARP_SIZE: *value = KF_EMU_WARP; return kf_gpuSuccess;
    case KF_ATTR_MAX_THREADS_BLOCK: *value = kMaxBlock; return kf_gpuSuccess;
    case KF_ATTR_MAX_THREADS_SM: *value = 2048; return kf_gpuSuccess;
    case KF_ATTR_SMEM_BLOCK: *value = 48 * 1024; return kf_gpuSuccess;
    case KF_ATTR_SMEM_OPTIN: *value = 227 * 1024; return kf_gpuSuccess;
    case KF_ATTR_L2: *value = 50 * 1024 * 1024; return kf_gpuSuccess;
    case KF_ATTR_BUS_BITS: *value = 6144; return kf_gpuSuccess;
    case KF_ATTR_MEM_CLOCK: *value = 2619000; return kf_gpuSuccess;
    case KF_ATTR_CC_MAJOR: *value = 9; return kf_gpuSuccess;
    case KF_ATTR_CC_MINOR: *value = 0; return kf_gpuSuccess;
    default: return kf_emu_err_invalid_value;
    }
}

const char *kf_emu_device_name(void)
{
    return KF_EMU_WARP == 64 ? "kfuse GPU emulator (warp 64)" : "kfuse GPU emulator (warp 32)";
}

kf_gpuError_t kf_gpuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = (size_t)16 << 30;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuMalloc(void **ptr, size_t bytes)
{
    /* 256-byte aligned as cudaMalloc; the size rounded up for aligned_alloc
     * (a size within 255 of SIZE_MAX would round to 0: out of memory) */
    *ptr = NULL;
    if (bytes > SIZE_MAX - 255)
        return kf_emu_err_memory;
    *ptr = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!*ptr) return kf_emu_err_memory;
    device_in_use[current_device] = true;
    std::lock_guard<std::mutex> hold(memory_lock);
    memory_device[(uintptr_t)*ptr] = {(uintptr_t)*ptr + (bytes ? bytes : 1), current_device};
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuFree(void *ptr)
{
    {
        std::lock_guard<std::mutex> hold(memory_lock);
        memory_device.erase((uintptr_t)ptr);
    }
    free(ptr);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuMemcpyAsync(void *dst, const void *src, size_t bytes, int kind,
                                kf_gpuStream_t s)
{
    (void)kind;
    Op op = {};
    op.kind = 1;
    op.dst = dst;
    op.src = src;
    op.bytes = bytes;
    issue(s, op);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuMemsetAsync(void *ptr, int value, size_t bytes, kf_gpuStream_t s)
{
    Op op = {};
    op.kind = 2;
    op.dst = ptr;
    op.value = value;
    op.bytes = bytes;
    issue(s, op);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuStreamSynchronize(kf_gpuStream_t s)
{
    (void)s;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuEventCreate(kf_gpuEvent_t *e)
{
    *e = new kf_emu_event{0.0};
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuEventDestroy(kf_gpuEvent_t e)
{
    delete e;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuEventRecord(kf_gpuEvent_t e, kf_gpuStream_t s)
{
    if (s && s->capturing) return kf_emu_err_capture;
    e->seconds = now_seconds();
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuEventSynchronize(kf_gpuEvent_t e)
{
    (void)e;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuEventElapsedTime(float *ms, kf_gpuEvent_t start, kf_gpuEvent_t stop)
{
    *ms = (float)((stop->seconds - start->seconds) * 1e3);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuStreamCreateNonBlocking(kf_gpuStream_t *s)
{
    *s = new kf_emu_stream();
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuStreamDestroy(kf_gpuStream_t s)
{
    delete s;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuStreamBeginCapture(kf_gpuStream_t s)
{
    /* as CUDA: the legacy default stream (NULL) cannot be captured */
    if (!s || s->capturing) return kf_emu_err_capture;
    s->capturing = true;
    s->captured.clear();
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuStreamEndCapture(kf_gpuStream_t s, kf_gpuGraph_t *g)
{
    *g = NULL;
    if (!s || !s->capturing) return kf_emu_err_capture;
    s->capturing = false;
    *g = new kf_emu_graph();
    (*g)->ops.swap(s->captured);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuGraphInstantiate(kf_gpuGraphExec_t *exec, kf_gpuGraph_t g)
{
    *exec = new kf_emu_graph(*g);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuGraphLaunch(kf_gpuGraphExec_t exec, kf_gpuStream_t s)
{
    if (s && s->capturing) return kf_emu_err_capture;
    for (Op &op : exec->ops) run_op(op);
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuGraphDestroy(kf_gpuGraph_t g)
{
    delete g;
    return kf_gpuSuccess;
}

kf_gpuError_t kf_gpuGraphExecDestroy(kf_gpuGraphExec_t exec)
{
    delete exec;
    return kf_gpuSuccess;
}
