/* The draft's two prime fields (draft-irtf-cfrg-vdaf-20, section 6.1).
 *
 * Field64, p = 2^64 - 2^32 + 1: elements in canonical form; a 128-bit product reduces with
 * 2^64 = 2^32 - 1 and 2^96 = -1 (mod p).
 * Field128, p = 2^128 - 28 * 2^64 + 1: elements in Montgomery form x * 2^128 mod p, two 64-bit
 * limbs; since p = 1 (mod 2^64), -1/p = 2^64 - 1 (mod 2^64) and each reduction step is a
 * negation and one 64 x 64 multiplication. Bytes in and out are canonical little-endian
 * (`f128_in` / `f128_out` convert). */
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

static inline f128 f128_add(f128 a, f128 b) {
    f128 s = a + b;
    if (s < a || s >= F128_P) s -= F128_P; /* wraps back below 2^128 when it carried */
    return s;
}

static inline f128 f128_sub(f128 a, f128 b) {
    f128 d = a - b;
    if (a < b) d += F128_P;
    return d;
}

/* m * (2^64 - 28) as m * 2^64 - 28 m: a shift and a small product for the wide multiply */
static inline u128 times_p1(uint64_t m) { return ((u128)m << 64) - (u128)m * 28; }

/* Montgomery reduction of t3:t2:t1:t0 < p * 2^128: the result times 2^128 is congruent. */
static inline f128 f128_redc(uint64_t t0, uint64_t t1, uint64_t t2, uint64_t t3) {
    uint64_t m = -t0; /* t0 + m * p = 0 (mod 2^64) */
    u128 s = times_p1(m) + t1 + (t0 != 0);
    t1 = (uint64_t)s;
    s = (s >> 64) + t2;
    t2 = (uint64_t)s;
    s = (s >> 64) + t3;
    t3 = (uint64_t)s;
    uint64_t t4 = (uint64_t)(s >> 64);
    m = -t1;
    s = times_p1(m) + t2 + (t1 != 0);
    t2 = (uint64_t)s;
    s = (s >> 64) + t3;
    t3 = (uint64_t)s;
    s = (s >> 64) + t4; /* the result's bit 128: 0 or 1 (the result is below 2p) */
    f128 r = ((u128)t3 << 64) | t2;
    if (s || r >= F128_P) r -= F128_P;
    return r;
}

/* Montgomery multiplication, a * b / 2^128 mod p, interleaving the product's two rows with
 * the two reduction steps (CIOS) on 64-bit limbs: six 64 x 64 products. */
static inline f128 f128_mul(f128 a, f128 b) {
    uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64);
    uint64_t b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
    /* row 0: t = a * b0 */
    u128 x = (u128)a0 * b0;
    uint64_t t0 = (uint64_t)x;
    x = (u128)a1 * b0 + (x >> 64);
    uint64_t t1 = (uint64_t)x, t2 = (uint64_t)(x >> 64);
    /* reduce: t + m p with m = -t0, then drop the zero low limb */
    uint64_t m = -t0;
    x = times_p1(m) + t1 + (t0 != 0);
    t0 = (uint64_t)x;
    x = (u128)t2 + (x >> 64);
    t1 = (uint64_t)x;
    t2 = (uint64_t)(x >> 64);
    /* row 1: t += a * b1 */
    x = (u128)a0 * b1 + t0;
    t0 = (uint64_t)x;
    x = (u128)a1 * b1 + t1 + (x >> 64);
    t1 = (uint64_t)x;
    t2 += (uint64_t)(x >> 64);
    /* reduce again */
    m = -t0;
    x = times_p1(m) + t1 + (t0 != 0);
    uint64_t r0 = (uint64_t)x;
    x = (u128)t2 + (x >> 64);
    uint64_t r1 = (uint64_t)x, top = (uint64_t)(x >> 64);
    f128 r = ((u128)r1 << 64) | r0;
    if (top || r >= F128_P) r -= F128_P;
    return r;
}

static inline f128 f128_in(u128 canonical) { return f128_mul(canonical, f128_r2); }
static inline u128 f128_out(f128 a) { return f128_redc((uint64_t)a, (uint64_t)(a >> 64), 0, 0); }
static inline f128 f128_one(void) { return ((u128)28 << 64) - 1; /* 2^128 mod p */ }
static inline f128 f128_zero(void) { return 0; }
static inline int f128_eq(f128 a, f128 b) { return a == b; }
static inline int f128_is_zero(f128 a) { return a == 0; }

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
