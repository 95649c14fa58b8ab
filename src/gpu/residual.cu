/* residual.cu - gated_residual on the GPU: h = h + a * gate, in place, gate
 * per token [B, S, D] or broadcast per batch [B, 1, D] (stride-0 token dim,
 * any batch stride), f32 or h's dtype. f32 math, one rounding at the store.
 * Kernels: kf_ew_* in common.cuh (row form whenever gate broadcasts: G
 * threads per row, 16-byte chunks, the row index by multiply-high).
 *
 * Napkin math (H200, bf16, 2 x 8064 x 2048): h read 66 MB + a read 66 MB + h
 * write 66 MB = 198 MB (a per-batch gate is 8 KB and stays in L2) -> ~50 us
 * at ~3.9 TB/s. */
#include "common.cuh"

kf_status kf_gpu_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                const kf_tensor *gate)
{
    return kf_ew_launch_t<KF_EW_GRES, KF_ACT_SILU>(ctx, "gated_residual", h, a, gate, h);
}
