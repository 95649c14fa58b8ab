/* convert.c - f16 / bf16 <-> f32 conversion on the host and the dtype-generic
 * element load / store (kf_load_f32, kf_store_f32) declared in internal.h.
 * Pure bit manipulation (src/cpu/half.h holds the inline versions that the
 * CPU backend's row loops use): round to nearest even, NaN kept as a quiet
 * NaN with its sign, Inf kept, f16 subnormals and overflow to Inf exact. */
#include <math.h>
#include <stdint.h>

#include "core/internal.h"
#include "cpu/half.h"

float kf_f16_to_f32(uint16_t h)
{
    return kf_half_f16_to_f32(h);
}

uint16_t kf_f32_to_f16(float f)
{
    return kf_half_f32_to_f16(f);
}

float kf_bf16_to_f32(uint16_t h)
{
    return kf_half_bf16_to_f32(h);
}

uint16_t kf_f32_to_bf16(float f)
{
    return kf_half_f32_to_bf16(f);
}

float kf_load_f32(const void *data, int dtype, int64_t i)
{
    switch (dtype) {
    case KF_F32:
        return ((const float *)data)[i];
    case KF_F16:
        return kf_half_f16_to_f32(((const uint16_t *)data)[i]);
    case KF_BF16:
        return kf_half_bf16_to_f32(((const uint16_t *)data)[i]);
    case KF_I32:
        return (float)((const int32_t *)data)[i];
    default:
        return NAN;
    }
}

void kf_store_f32(void *data, int dtype, int64_t i, float v)
{
    switch (dtype) {
    case KF_F32:
        ((float *)data)[i] = v;
        break;
    case KF_F16:
        ((uint16_t *)data)[i] = kf_half_f32_to_f16(v);
        break;
    case KF_BF16:
        ((uint16_t *)data)[i] = kf_half_f32_to_bf16(v);
        break;
    case KF_I32: {
        /* round to nearest, saturate; NaN stores 0 */
        float r = nearbyintf(v);
        int32_t out = 0;
        if (r >= 2147483647.0f)
            out = INT32_MAX;
        else if (r <= -2147483648.0f)
            out = INT32_MIN;
        else if (r == r)
            out = (int32_t)r;
        ((int32_t *)data)[i] = out;
        break;
    }
    default:
        break;
    }
}
