/* Eight X25519 ladders side by side: see x25519_lanes.h.
 *
 * A field element mod p = 2^255 - 19 is five limbs of 52 bits (radix 2^52), each limb an
 * AVX-512 register holding that limb of eight elements. IFMA multiplies the low 52 bits of two
 * lanes and adds the low or the high 52 bits of the 104-bit product, so every limb fed to a
 * multiplication must be below 2^52: every operation ends with `normal`, which leaves limbs
 * 0-3 below 2^52 and limb 4 below 2^47 + 2 (the value below 2^255 + 2^209). The private
 * scalars decide only the swaps, done with a mask: no branch and no address depends on it. */
#include "x25519_lanes.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)

#pragma GCC push_options
#pragma GCC target("avx512f,avx512ifma")
#include <immintrin.h>

typedef struct {
    __m512i l[5];
} Fe;

#define MASK52 ((1ULL << 52) - 1)
#define MASK47 ((1ULL << 47) - 1)

static inline __m512i lo52(__m512i acc, __m512i a, __m512i b)
{
    return _mm512_madd52lo_epu64(acc, a, b);
}

static inline __m512i hi52(__m512i acc, __m512i a, __m512i b)
{
    return _mm512_madd52hi_epu64(acc, a, b);
}

/* Limbs below 2^62 to the normal form (the operations hand it limbs below 2^56): carry, fold
 * the bits from 2^255 up back in as 19 times their value, carry again. */
static inline void normal(Fe *r)
{
    const __m512i mask52 = _mm512_set1_epi64((long long)MASK52);
    const __m512i mask47 = _mm512_set1_epi64((long long)MASK47);
    const __m512i nineteen = _mm512_set1_epi64(19);
    for (int k = 0; k < 4; k++) {
        r->l[k + 1] = _mm512_add_epi64(r->l[k + 1], _mm512_srli_epi64(r->l[k], 52));
        r->l[k] = _mm512_and_si512(r->l[k], mask52);
    }
    /* bits from 2^255 up: times 19 into limb 0 (2^255 = 19 mod p) */
    __m512i top = _mm512_srli_epi64(r->l[4], 47);
    r->l[4] = _mm512_and_si512(r->l[4], mask47);
    r->l[0] = lo52(r->l[0], top, nineteen);
    for (int k = 0; k < 4; k++) {
        r->l[k + 1] = _mm512_add_epi64(r->l[k + 1], _mm512_srli_epi64(r->l[k], 52));
        r->l[k] = _mm512_and_si512(r->l[k], mask52);
    }
}

static inline void fe_mul(Fe *r, const Fe *a, const Fe *b)
{
    const __m512i mask52 = _mm512_set1_epi64((long long)MASK52);
    const __m512i k608 = _mm512_set1_epi64(608); /* 2^260 = 2^5 * 19 mod p */
    __m512i z[10];
    for (int k = 0; k < 10; k++)
        z[k] = _mm512_setzero_si512();
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            z[i + j] = lo52(z[i + j], a->l[i], b->l[j]);
            z[i + j + 1] = hi52(z[i + j + 1], a->l[i], b->l[j]);
        }
    /* z[k] < 10 * 2^52: carry z[4..8] so that z[5..9] are below 2^52 (the product is below
     * 2^511, so z[9] then is too) */
    for (int k = 4; k < 9; k++) {
        z[k + 1] = _mm512_add_epi64(z[k + 1], _mm512_srli_epi64(z[k], 52));
        z[k] = _mm512_and_si512(z[k], mask52);
    }
    /* r = z[0..4] + 608 * z[5..9]; limb k below 10 * 2^52 + 2 * 2^52 before `normal` */
    Fe t;
    for (int k = 0; k < 5; k++)
        t.l[k] = lo52(z[k], z[k + 5], k608);
    for (int k = 0; k < 4; k++)
        t.l[k + 1] = hi52(t.l[k + 1], z[k + 5], k608);
    /* 608 * z[9]'s high half weighs 2^260: 608 more into limb 0 (it is below 2^10) */
    __m512i over = hi52(_mm512_setzero_si512(), z[9], k608);
    t.l[0] = lo52(t.l[0], over, k608);
    normal(&t);
    *r = t;
}

static inline void fe_sq(Fe *r, const Fe *a)
{
    fe_mul(r, a, a);
}

static inline void fe_add(Fe *r, const Fe *a, const Fe *b)
{
    for (int k = 0; k < 5; k++)
        r->l[k] = _mm512_add_epi64(a->l[k], b->l[k]);
    normal(r);
}

/* 8p in limbs each above the normal form's largest limb, so a + 8p - b never goes below 0. */
static inline void fe_sub(Fe *r, const Fe *a, const Fe *b)
{
    static const long long eight_p[5] = {
        (1LL << 53) - 152, (1LL << 53) - 2, (1LL << 53) - 2, (1LL << 53) - 2, (1LL << 50) - 2};
    for (int k = 0; k < 5; k++)
        r->l[k] = _mm512_sub_epi64(_mm512_add_epi64(a->l[k], _mm512_set1_epi64(eight_p[k])),
                                   b->l[k]);
    normal(r);
}

/* c (below 2^52) in every lane */
static inline void fe_small(Fe *r, uint64_t c)
{
    r->l[0] = _mm512_set1_epi64((long long)c);
    for (int k = 1; k < 5; k++)
        r->l[k] = _mm512_setzero_si512();
}

static inline void fe_mul_small(Fe *r, const Fe *a, uint64_t c)
{
    Fe b;
    fe_small(&b, c);
    fe_mul(r, a, &b);
}

/* Swap a and b in the lanes of m. */
static inline void fe_cswap(Fe *a, Fe *b, __mmask8 m)
{
    for (int k = 0; k < 5; k++) {
        __m512i x = _mm512_mask_blend_epi64(m, a->l[k], b->l[k]);
        __m512i y = _mm512_mask_blend_epi64(m, b->l[k], a->l[k]);
        a->l[k] = x;
        b->l[k] = y;
    }
}

static void fe_sq_times(Fe *r, const Fe *a, int n)
{
    fe_sq(r, a);
    for (int i = 1; i < n; i++)
        fe_sq(r, r);
}

/* z^(p - 2) = z^(2^255 - 21) */
static void fe_invert(Fe *r, const Fe *z)
{
    Fe z2, z9, z11, z2_5_0, z2_10_0, z2_20_0, z2_50_0, z2_100_0, t;
    fe_sq(&z2, z);
    fe_sq_times(&t, &z2, 2);
    fe_mul(&z9, &t, z);
    fe_mul(&z11, &z9, &z2);
    fe_sq(&t, &z11);
    fe_mul(&z2_5_0, &t, &z9);
    fe_sq_times(&t, &z2_5_0, 5);
    fe_mul(&z2_10_0, &t, &z2_5_0);
    fe_sq_times(&t, &z2_10_0, 10);
    fe_mul(&z2_20_0, &t, &z2_10_0);
    fe_sq_times(&t, &z2_20_0, 20);
    fe_mul(&t, &t, &z2_20_0);
    fe_sq_times(&t, &t, 10);
    fe_mul(&z2_50_0, &t, &z2_10_0);
    fe_sq_times(&t, &z2_50_0, 50);
    fe_mul(&z2_100_0, &t, &z2_50_0);
    fe_sq_times(&t, &z2_100_0, 100);
    fe_mul(&t, &t, &z2_100_0);
    fe_sq_times(&t, &t, 50);
    fe_mul(&t, &t, &z2_50_0);
    fe_sq_times(&t, &t, 5);
    fe_mul(r, &t, &z11);
}

static uint64_t load64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void fe_load(Fe *r, const unsigned char u[X25519_LANES][32])
{
    uint64_t limbs[5][X25519_LANES] __attribute__((aligned(64)));
    for (int i = 0; i < X25519_LANES; i++) {
        uint64_t w0 = load64(u[i]), w1 = load64(u[i] + 8), w2 = load64(u[i] + 16);
        uint64_t w3 = load64(u[i] + 24) & 0x7fffffffffffffffULL; /* the top bit is ignored */
        limbs[0][i] = w0 & MASK52;
        limbs[1][i] = ((w0 >> 52) | (w1 << 12)) & MASK52;
        limbs[2][i] = ((w1 >> 40) | (w2 << 24)) & MASK52;
        limbs[3][i] = ((w2 >> 28) | (w3 << 36)) & MASK52;
        limbs[4][i] = w3 >> 16;
    }
    for (int k = 0; k < 5; k++)
        r->l[k] = _mm512_load_si512(limbs[k]);
}

/* Lane i's element, fully reduced, as 32 little-endian bytes; 1 unless it is zero. */
static void fe_store(unsigned char out[X25519_LANES][32], int ok[X25519_LANES], const Fe *a)
{
    uint64_t limbs[5][X25519_LANES] __attribute__((aligned(64)));
    for (int k = 0; k < 5; k++)
        _mm512_store_si512(limbs[k], a->l[k]);
    for (int i = 0; i < X25519_LANES; i++) {
        /* normal form: below 2^255 + 2^209, so less than 2p */
        unsigned __int128 acc;
        uint64_t w[4];
        w[0] = limbs[0][i] | (limbs[1][i] << 52);
        w[1] = (limbs[1][i] >> 12) | (limbs[2][i] << 40);
        w[2] = (limbs[2][i] >> 24) | (limbs[3][i] << 28);
        w[3] = (limbs[3][i] >> 36) | (limbs[4][i] << 16);
        /* fold bit 255, then subtract p when the value is at least p: add 19 and look at
         * bit 255 (no branch on the value) */
        uint64_t top = w[3] >> 63;
        w[3] &= 0x7fffffffffffffffULL;
        acc = (unsigned __int128)w[0] + 19 * top;
        for (int j = 0; j < 4; j++) {
            if (j)
                acc += w[j];
            w[j] = (uint64_t)acc;
            acc >>= 64;
        }
        uint64_t t[4];
        acc = (unsigned __int128)w[0] + 19;
        for (int j = 0; j < 4; j++) {
            if (j)
                acc += w[j];
            t[j] = (uint64_t)acc;
            acc >>= 64;
        }
        uint64_t take = 0 - (t[3] >> 63); /* all ones when value + 19 >= 2^255 */
        t[3] &= 0x7fffffffffffffffULL;
        uint64_t any = 0;
        for (int j = 0; j < 4; j++) {
            uint64_t v = (t[j] & take) | (w[j] & ~take);
            any |= v;
            for (int b = 0; b < 8; b++)
                out[i][8 * j + b] = (unsigned char)(v >> (8 * b));
        }
        ok[i] = any != 0;
    }
}

static int lanes_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
}

int x25519_lanes_available(void)
{
    static int known = -1;
    if (known < 0)
        known = lanes_supported();
    return known;
}

void x25519_lanes(unsigned char out[X25519_LANES][32], int ok[X25519_LANES],
                  const unsigned char scalars[X25519_LANES][32],
                  const unsigned char u[X25519_LANES][32])
{
    /* each lane's clamped scalar as four 64-bit words: words[j] holds word j of every lane */
    uint64_t k[4][X25519_LANES] __attribute__((aligned(64)));
    for (int i = 0; i < X25519_LANES; i++) {
        unsigned char c[32];
        memcpy(c, scalars[i], 32);
        c[0] &= 248;
        c[31] &= 127;
        c[31] |= 64;
        for (int j = 0; j < 4; j++)
            k[j][i] = load64(c + 8 * j);
        memset(c, 0, sizeof c);
    }
    __m512i words[4];
    for (int j = 0; j < 4; j++)
        words[j] = _mm512_load_si512(k[j]);
    const __m512i one = _mm512_set1_epi64(1);
    Fe x1, x2, z2, x3, z3, a, aa, b, bb, e, c, d, da, cb, t;
    fe_load(&x1, u);
    fe_small(&x2, 1);
    fe_small(&z2, 0);
    fe_small(&z3, 1);
    x3 = x1;
    __m512i swap = _mm512_setzero_si512();
    for (int bit = 254; bit >= 0; bit--) {
        /* every lane's bit `bit` of its scalar; the swap as a lane mask (no branch) */
        __m512i k_t = _mm512_and_si512(_mm512_srli_epi64(words[bit >> 6], bit & 63), one);
        swap = _mm512_xor_si512(swap, k_t);
        __mmask8 m = _mm512_test_epi64_mask(swap, swap);
        fe_cswap(&x2, &x3, m);
        fe_cswap(&z2, &z3, m);
        swap = k_t;
        fe_add(&a, &x2, &z2);
        fe_sq(&aa, &a);
        fe_sub(&b, &x2, &z2);
        fe_sq(&bb, &b);
        fe_sub(&e, &aa, &bb);
        fe_add(&c, &x3, &z3);
        fe_sub(&d, &x3, &z3);
        fe_mul(&da, &d, &a);
        fe_mul(&cb, &c, &b);
        fe_add(&t, &da, &cb);
        fe_sq(&x3, &t);
        fe_sub(&t, &da, &cb);
        fe_sq(&t, &t);
        fe_mul(&z3, &x1, &t);
        fe_mul(&x2, &aa, &bb);
        fe_mul_small(&t, &e, 121665);
        fe_add(&t, &aa, &t);
        fe_mul(&z2, &e, &t);
    }
    __mmask8 m = _mm512_test_epi64_mask(swap, swap);
    fe_cswap(&x2, &x3, m);
    fe_cswap(&z2, &z3, m);
    fe_invert(&z2, &z2);
    fe_mul(&x2, &x2, &z2);
    fe_store(out, ok, &x2);
    memset(k, 0, sizeof k);
    __asm__ __volatile__("" : : "r"(k) : "memory");
}

#pragma GCC pop_options

#else /* not x86-64 with GCC: OpenSSL does every X25519 */

int x25519_lanes_available(void)
{
    return 0;
}

void x25519_lanes(unsigned char out[X25519_LANES][32], int ok[X25519_LANES],
                  const unsigned char scalars[X25519_LANES][32],
                  const unsigned char u[X25519_LANES][32])
{
    (void)scalars;
    (void)u;
    memset(out, 0, X25519_LANES * 32);
    for (int i = 0; i < X25519_LANES; i++)
        ok[i] = 0;
}

#endif
