/* The draft's two prime fields (draft-irtf-cfrg-vdaf-20, section 6.1).
 *
 * Field64, p = 2^64 - 2^32 + 1: elements in canonical form; a 128-bit product reduces with
 * 2^64 = 2^32 - 1 and 2^96 = -1 (mod p).
 * Field128, p = 2^128 - 28 * 2^64 + 1: elements in Montgomery form x * 2^128 mod p, two 64-bit
 * limbs; since p = 1 (mod 2^64), subtracting t0 * p clears a low limb t0 exactly, and each
 * reduction step is one 64 x 64 multiplication (f128_redc). Bytes in and out are canonical
 * little-endian (`f128_in` / `f128_out` convert). */
#ifndef LDPCOLLECT_FIELD_H
#define LDPCOLLECT_FIELD_H

#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

/* -- Field64 ---------------------------------------------------------------------------- */

#define F64_P 0xFFFFFFFF00000001ULL
#define F64_EPS 0xFFFFFFFFULL /* 2^64 mod p */

typedef uint64_t f64;

static inline f64 f64_add(f64 a, f64 b) {
    f64 s = a + b;
    /* a + b >= 2^64: add 2^64 mod p; a + b < 2p < 2^64 + p so once is enough. */
    if (s < a) s += F64_EPS;
    if (s >= F64_P) s -= F64_P;
    return s;
}

static inline f64 f64_sub(f64 a, f64 b) {
    f64 d = a - b;
    if (a < b) d += F64_P;
    return d;
}

static inline f64 f64_reduce(u128 x) {
    uint64_t lo = (uint64_t)x, hi = (uint64_t)(x >> 64);
    uint64_t hi_hi = hi >> 32, hi_lo = hi & F64_EPS;
    /* x = lo + hi_lo * 2^64 + hi_hi * 2^96 = lo + hi_lo * (2^32 - 1) - hi_hi */
    uint64_t t0 = lo - hi_hi;
    if (lo < hi_hi) t0 -= F64_EPS; /* borrowed 2^64: subtract 2^64 mod p */
    uint64_t t1 = hi_lo * F64_EPS;
    uint64_t s = t0 + t1;
    if (s < t0) s += F64_EPS;
    if (s >= F64_P) s -= F64_P;
    return s;
}

static inline f64 f64_mul(f64 a, f64 b) { return f64_reduce((u128)a * b); }
static inline f64 f64_in(u128 canonical) { return (f64)canonical; }
static inline u128 f64_out(f64 a) { return a; }
static inline f64 f64_one(void) { return 1; }
static inline f64 f64_zero(void) { return 0; }
static inline int f64_eq(f64 a, f64 b) { return a == b; }
static inline int f64_is_zero(f64 a) { return a == 0; }

/* -- Field128 --------------------------------------------------------------------------- */

#define F128_P1 0xFFFFFFFFFFFFFFE4ULL /* high limb of p; the low limb is 1 */
#define F128_P (((u128)F128_P1 << 64) | 1)

typedef u128 f128;

extern f128 f128_r2; /* 2^256 mod p, for conversion into Montgomery form */

/* Field128 arithmetic works on 64-bit limbs with explicit carries and branch-free final
 * subtractions: gcc keeps the limbs in registers (its unsigned __int128 code spilled them),
 * and values are random, so a branch on a carry mispredicts half of the time. */

/* x + y + *carry and x - y - *borrow, the carry (borrow) out in the same place: add/adc and
 * sub/sbb chains. gcc turns the intrinsics into those; its unsigned __int128 sums of the
 * same went through the stack. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t f128_adc(uint64_t x, uint64_t y, uint64_t *carry) {
    unsigned long long s;
    *carry = _addcarry_u64((unsigned char)*carry, x, y, &s);
    return s;
}
static inline uint64_t f128_sbb(uint64_t x, uint64_t y, uint64_t *borrow) {
    unsigned long long d;
    *borrow = _subborrow_u64((unsigned char)*borrow, x, y, &d);
    return d;
}
#else
static inline uint64_t f128_adc(uint64_t x, uint64_t y, uint64_t *carry) {
    u128 s = (u128)x + y + *carry;
    *carry = (uint64_t)(s >> 64);
    return (uint64_t)s;
}
static inline uint64_t f128_sbb(uint64_t x, uint64_t y, uint64_t *borrow) {
    u128 d = (u128)x - y - *borrow;
    *borrow = (uint64_t)(d >> 64) & 1;
    return (uint64_t)d;
}
#endif

/* hi:lo, minus p when `over` (bit 128 of the value) is set or hi:lo >= p. Inputs below 2p. */
static inline f128 f128_final(uint64_t lo, uint64_t hi, uint64_t over) {
    uint64_t borrow = 0;
    uint64_t dlo = f128_sbb(lo, 1, &borrow);
    uint64_t dhi = f128_sbb(hi, F128_P1, &borrow);
    /* a mask, not `take ? d : x`: gcc turns that into a branch in some loops, and the
     * difference is taken about half of the time */
    uint64_t take = -((over | (borrow ^ 1)) & 1);
    lo ^= (lo ^ dlo) & take;
    hi ^= (hi ^ dhi) & take;
    return ((u128)hi << 64) | lo;
}

static inline f128 f128_add(f128 a, f128 b) {
    uint64_t carry = 0;
    uint64_t lo = f128_adc((uint64_t)a, (uint64_t)b, &carry);
    uint64_t hi = f128_adc((uint64_t)(a >> 64), (uint64_t)(b >> 64), &carry);
    return f128_final(lo, hi, carry);
}

static inline f128 f128_sub(f128 a, f128 b) {
    uint64_t borrow = 0;
    uint64_t lo = f128_sbb((uint64_t)a, (uint64_t)b, &borrow);
    uint64_t hi = f128_sbb((uint64_t)(a >> 64), (uint64_t)(b >> 64), &borrow);
    uint64_t mask = -borrow, carry = 0; /* went below zero: add p back */
    lo = f128_adc(lo, 1 & mask, &carry);
    hi = f128_adc(hi, F128_P1 & mask, &carry);
    return ((u128)hi << 64) | lo;
}

/* Montgomery reduction of t3:t2:t1:t0 < p * 2^128: t / 2^128 mod p. p = 1 (mod 2^64), so
 * subtracting m p with m the low limb clears that limb exactly (no carry to track), and
 * since p's low limb is 1, m p = m + m * p1 * 2^64: one 64 x 64 product per limb. Two
 * steps leave r = (t - m p - m' p 2^64) / 2^128 with -p < r < p; r < 0 shows as a borrow
 * out of either step, and p is added back. */
static inline f128 f128_redc(uint64_t t0, uint64_t t1, uint64_t t2, uint64_t t3) {
    /* step 1: s = (t - t0 p) / 2^64 = t3:t2:t1 - t0 * p1, above -p, so when it borrows its
     * top limb is all ones and the borrow stands for the sign */
    u128 mp = (u128)t0 * F128_P1;
    uint64_t b1 = 0;
    t1 = f128_sbb(t1, (uint64_t)mp, &b1);
    t2 = f128_sbb(t2, (uint64_t)(mp >> 64), &b1);
    t3 = f128_sbb(t3, 0, &b1);
    /* step 2: r = (s - t1 p) / 2^64 = t3:t2 (sign b1) - t1 * p1 */
    mp = (u128)t1 * F128_P1;
    uint64_t b2 = 0;
    t2 = f128_sbb(t2, (uint64_t)mp, &b2);
    t3 = f128_sbb(t3, (uint64_t)(mp >> 64), &b2);
    uint64_t mask = -(b1 | b2), carry = 0; /* r < 0: add p */
    t2 = f128_adc(t2, 1 & mask, &carry);
    t3 = f128_adc(t3, F128_P1 & mask, &carry);
    return ((u128)t3 << 64) | t2;
}

/* Montgomery multiplication, a * b / 2^128 mod p: the 256-bit product (four 64 x 64
 * products), then two reduction steps (one 64 x 64 product each). */
static inline f128 f128_mul(f128 a, f128 b) {
    uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64);
    uint64_t b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
    u128 p00 = (u128)a0 * b0, p01 = (u128)a0 * b1, p10 = (u128)a1 * b0, p11 = (u128)a1 * b1;
    uint64_t c = 0, d = 0;
    uint64_t t0 = (uint64_t)p00;
    uint64_t t1 = f128_adc((uint64_t)(p00 >> 64), (uint64_t)p01, &c);
    uint64_t t2 = f128_adc((uint64_t)(p01 >> 64), (uint64_t)p11, &c);
    uint64_t t3 = (uint64_t)(p11 >> 64) + c;
    t1 = f128_adc(t1, (uint64_t)p10, &d);
    t2 = f128_adc(t2, (uint64_t)(p10 >> 64), &d);
    t3 += d;
    return f128_redc(t0, t1, t2, t3);
}

static inline f128 f128_in(u128 canonical) { return f128_mul(canonical, f128_r2); }
static inline u128 f128_out(f128 a) { return f128_redc((uint64_t)a, (uint64_t)(a >> 64), 0, 0); }
static inline f128 f128_one(void) { return ((u128)28 << 64) - 1; /* 2^128 mod p */ }
static inline f128 f128_zero(void) { return 0; }
static inline int f128_eq(f128 a, f128 b) { return a == b; }
static inline int f128_is_zero(f128 a) { return a == 0; }
/* All ones when a == b, else 0, computed without a branch (the prover's selections on a
 * device's secret measurement). */
static inline u128 f128_eq_mask(f128 a, f128 b) {
    u128 d = a ^ b;
    uint64_t t = (uint64_t)d | (uint64_t)(d >> 64);
    uint64_t m = ((t | (0 - t)) >> 63) - 1;
    return ((u128)m << 64) | m;
}

void field_init_constants(void);

/* Little-endian element codecs (canonical values). */
static inline u128 load_le(const uint8_t *src, unsigned size) {
    uint64_t lo, hi = 0;
    memcpy(&lo, src, 8);
    if (size == 16) memcpy(&hi, src + 8, 8);
    return ((u128)hi << 64) | lo;
}

static inline void store_le(uint8_t *dst, u128 v, unsigned size) {
    uint64_t lo = (uint64_t)v, hi = (uint64_t)(v >> 64);
    memcpy(dst, &lo, 8);
    if (size == 16) memcpy(dst + 8, &hi, 8);
}

#endif
