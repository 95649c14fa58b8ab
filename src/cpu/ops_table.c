/* ops_table.c - the CPU backend's ops table of one compiled copy of the
 * kernel files: kf_cpu_ops_baseline in the baseline copy, kf_cpu_avx2_ops in
 * the AVX2 copy (the renames at the top of cpu.h). The op entries are this
 * copy's; memory, sync, timing and the tools' helpers are backend.c's, the
 * same in both tables. backend.c points each CPU context at one table. */
#include "cpu/cpu.h"

const kf_backend_ops kf_cpu_ops_baseline = {
    .rms_norm = kf_cpu_rms_norm,
    .add_rms_norm = kf_cpu_add_rms_norm,
    .layer_norm = kf_cpu_layer_norm,
    .ada_norm = kf_cpu_ada_norm,
    .add_ada_norm = kf_cpu_add_ada_norm,
    .gated_residual = kf_cpu_gated_residual,
    .rope = kf_cpu_rope,
    .rms_norm_rope = kf_cpu_rms_norm_rope,
    .glu = kf_cpu_glu,
    .activation = kf_cpu_activation,
    .softmax = kf_cpu_softmax,
    .malloc_ = kf_cpu_malloc,
    .free_ = kf_cpu_free,
    .memcpy_ = kf_cpu_memcpy,
    .synchronize = kf_cpu_synchronize,
    .copy_d2d = kf_cpu_copy_d2d,
    .empty_kernel = kf_cpu_empty_kernel,
    .timer_start = kf_cpu_timer_start,
    .timer_stop = kf_cpu_timer_stop,
    .memset_ = kf_cpu_memset,
    .destroy = kf_cpu_destroy,
};
