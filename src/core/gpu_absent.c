/* gpu_absent.c - stands in for the GPU backend in builds without a GPU
 * compiler: the library then runs on its CPU backend only. */
#include "core/internal.h"

int kf_gpu_compiled(void)
{
    return 0;
}

int kf_gpu_device_count(void)
{
    return 0;
}

kf_status kf_gpu_init(kf_ctx *ctx, int device)
{
    (void)device;
    return kf_set_error(ctx, KF_ERR_NO_DEVICE,
                        "this build of kfuse has no GPU backend (no CUDA/HIP compiler at build time)");
}
