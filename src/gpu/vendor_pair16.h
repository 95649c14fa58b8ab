/* vendor_pair16.h - the packed 16-bit multiply and add (kf_mul2_bf16,
 * kf_mul2_f16, kf_add2_bf16, kf_add2_f16) for the vendor layers that have
 * no packed instruction for them (vendor_hip.h, vendor_emu.h): a * b (MUL)
 * or a + b of two packed pairs of 16-bit floats (BF16: bf16, else f16),
 * element by element, the f32 result (exact for a product of 16-bit inputs)
 * rounded once, as vendor_cuda.h's instructions do. Included by those
 * headers after their kf_*_bits conversions. */
#ifndef KF_VENDOR_PAIR16_H
#define KF_VENDOR_PAIR16_H

template <bool BF16, bool MUL>
static __device__ __forceinline__ unsigned int kf_pair_op16(unsigned int a, unsigned int b)
{
    unsigned int r = 0;
    for (int i = 0; i < 2; i++) {
        const unsigned short ea = (unsigned short)(a >> 16 * i), eb = (unsigned short)(b >> 16 * i);
        const float x = BF16 ? kf_bf16_bits_to_f32(ea) : kf_f16_bits_to_f32(ea);
        const float y = BF16 ? kf_bf16_bits_to_f32(eb) : kf_f16_bits_to_f32(eb);
        const float z = MUL ? x * y : x + y;
        r |= (unsigned int)(BF16 ? kf_f32_to_bf16_bits(z) : kf_f32_to_f16_bits(z)) << 16 * i;
    }
    return r;
}
static __device__ __forceinline__ unsigned int kf_mul2_bf16(unsigned int a, unsigned int b) { return kf_pair_op16<true, true>(a, b); }
static __device__ __forceinline__ unsigned int kf_mul2_f16(unsigned int a, unsigned int b) { return kf_pair_op16<false, true>(a, b); }
static __device__ __forceinline__ unsigned int kf_add2_bf16(unsigned int a, unsigned int b) { return kf_pair_op16<true, false>(a, b); }
static __device__ __forceinline__ unsigned int kf_add2_f16(unsigned int a, unsigned int b) { return kf_pair_op16<false, false>(a, b); }

#endif /* KF_VENDOR_PAIR16_H */
