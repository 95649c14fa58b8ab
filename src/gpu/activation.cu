/* activation.cu - gated and plain activations on the GPU:
 *   glu:        y = act(gate) * up, act = silu | gelu_tanh | gelu_erf (two
 *               views; the core splits a packed [.., 2I] input into two
 *               strided views, which take the row form);
 *   activation: y = gelu(x) (tanh or erf form) or silu(x); y may alias x.
 * Math in f32, one rounding at the store (kf_act in common.cuh says which
 * approximations each dtype takes). Kernels: kf_ew_* in common.cuh.
 *
 * Napkin math (H200, bf16): glu 8192 x 14336: 2 x 235 MB read + 235 MB write
 * = 705 MB -> ~170 us at 4.2 TB/s; gelu 16128 x 8192: 264 + 264 MB -> ~130 us.
 * Flat form: 256-thread blocks, one 16-byte chunk per operand per thread per
 * step, grid capped at 64 waves of full occupancy, grid-stride beyond. */
#include "common.cuh"

kf_status kf_gpu_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, int act,
                     const kf_tensor *y)
{
    return kf_ew_launch<KF_EW_GLU>(ctx, "glu", gate, up, NULL, y, act);
}

kf_status kf_gpu_activation(kf_ctx *ctx, const kf_tensor *x, int act, const kf_tensor *y)
{
    return kf_ew_launch<KF_EW_ACT>(ctx, act == KF_ACT_SILU ? "silu" : "gelu", x, NULL, NULL, y,
                                   act);
}
