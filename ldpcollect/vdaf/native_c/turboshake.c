#include "turboshake.h"

#include <string.h>

/* The tables; `ts_init_constants` re-derives them from the specification, and checks the
 * written-out permutation against one computed from them, and refuses to start if either
 * differs. */
static const uint64_t ROUND_CONSTANTS_12[12] = {
    0x000000008000808BULL, 0x800000000000008BULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
    0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800AULL, 0x800000008000000AULL,
    0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL,
};
static const unsigned RHO[25] = {0,  1,  62, 28, 27, 36, 44, 6,  55, 20, 3,  10, 43,
                                 25, 39, 41, 45, 15, 21, 8,  18, 2,  61, 56, 14};
/* pi: lane (x, y) moves to (y, 2x + 3y) */
static const unsigned PI_DST[25] = {0,  10, 20, 5,  15, 16, 1,  11, 21, 6,  7,  17, 2,
                                    12, 22, 23, 8,  18, 3,  13, 14, 24, 9,  19, 4};

/* FIPS 202, algorithm 5: rc(t) from the LFSR x^8 + x^6 + x^5 + x^4 + 1. */
static int lfsr_bit(unsigned t) {
    if (t % 255 == 0) return 1;
    unsigned r = 0x01;
    for (unsigned i = 1; i <= t % 255; i++) {
        r <<= 1;
        if (r & 0x100) r ^= 0x171;
    }
    return r & 1;
}

static inline uint64_t rotl(uint64_t v, unsigned n) {
    return n ? (v << n) | (v >> (64 - n)) : v;
}

/* Keccak-p[1600, 12] straight from the tables: `ts_init_constants` checks the written-out
 * keccak_p12 below against it. */
static void keccak_p12_tables(uint64_t a[25]) {
    uint64_t c[5], d[5], b[25];
    for (unsigned round = 0; round < 12; round++) {
        for (unsigned x = 0; x < 5; x++) c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
        for (unsigned x = 0; x < 5; x++) d[x] = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1);
        for (unsigned i = 0; i < 25; i++) b[PI_DST[i]] = rotl(a[i] ^ d[i % 5], RHO[i]);
        for (unsigned i = 0; i < 25; i++) {
            unsigned x = i % 5, row = i - x;
            a[i] = b[i] ^ (~b[row + (x + 1) % 5] & b[row + (x + 2) % 5]);
        }
        a[0] ^= ROUND_CONSTANTS_12[round];
    }
}

#define ROL(v, n) (((v) << (n)) | ((v) >> (64 - (n)))) /* n in 1..63 */
/* chi on one row of five lanes b0..b4 */
#define CHI(o0, o1, o2, o3, o4)                                                       \
    do {                                                                               \
        o0 = b0 ^ (~b1 & b2);                                                          \
        o1 = b1 ^ (~b2 & b3);                                                          \
        o2 = b2 ^ (~b3 & b4);                                                          \
        o3 = b3 ^ (~b4 & b0);                                                          \
        o4 = b4 ^ (~b0 & b1);                                                          \
    } while (0)

/* One round from lanes x00..x24 into y00..y24 (token pasting names them), with round
 * constant rc: theta (c, d), then per output row rho and pi (b: lane i comes from lane
 * PI_DST^-1, rotated by its RHO) and chi, then iota. */
#define KECCAK_ROUND(x, y, rc)                                                              \
    do {                                                                                     \
        c0 = x##00 ^ x##05 ^ x##10 ^ x##15 ^ x##20;                                          \
        c1 = x##01 ^ x##06 ^ x##11 ^ x##16 ^ x##21;                                          \
        c2 = x##02 ^ x##07 ^ x##12 ^ x##17 ^ x##22;                                          \
        c3 = x##03 ^ x##08 ^ x##13 ^ x##18 ^ x##23;                                          \
        c4 = x##04 ^ x##09 ^ x##14 ^ x##19 ^ x##24;                                          \
        d0 = c4 ^ ROL(c1, 1), d1 = c0 ^ ROL(c2, 1), d2 = c1 ^ ROL(c3, 1);                   \
        d3 = c2 ^ ROL(c4, 1), d4 = c3 ^ ROL(c0, 1);                                          \
        b0 = x##00 ^ d0, b1 = ROL(x##06 ^ d1, 44), b2 = ROL(x##12 ^ d2, 43);                 \
        b3 = ROL(x##18 ^ d3, 21), b4 = ROL(x##24 ^ d4, 14);                                  \
        CHI(y##00, y##01, y##02, y##03, y##04);                                              \
        b0 = ROL(x##03 ^ d3, 28), b1 = ROL(x##09 ^ d4, 20), b2 = ROL(x##10 ^ d0, 3);         \
        b3 = ROL(x##16 ^ d1, 45), b4 = ROL(x##22 ^ d2, 61);                                  \
        CHI(y##05, y##06, y##07, y##08, y##09);                                              \
        b0 = ROL(x##01 ^ d1, 1), b1 = ROL(x##07 ^ d2, 6), b2 = ROL(x##13 ^ d3, 25);          \
        b3 = ROL(x##19 ^ d4, 8), b4 = ROL(x##20 ^ d0, 18);                                   \
        CHI(y##10, y##11, y##12, y##13, y##14);                                              \
        b0 = ROL(x##04 ^ d4, 27), b1 = ROL(x##05 ^ d0, 36), b2 = ROL(x##11 ^ d1, 10);        \
        b3 = ROL(x##17 ^ d2, 15), b4 = ROL(x##23 ^ d3, 56);                                  \
        CHI(y##15, y##16, y##17, y##18, y##19);                                              \
        b0 = ROL(x##02 ^ d2, 62), b1 = ROL(x##08 ^ d3, 55), b2 = ROL(x##14 ^ d4, 39);        \
        b3 = ROL(x##15 ^ d0, 41), b4 = ROL(x##21 ^ d1, 2);                                   \
        CHI(y##20, y##21, y##22, y##23, y##24);                                              \
        y##00 ^= (rc);                                                                       \
    } while (0)

/* Keccak-p[1600, 12]: the last 12 rounds of Keccak-f[1600]. The lanes are local
 * variables and every step is written out (KECCAK_ROUND): the compiler keeps lanes in
 * registers and rotates by immediates (the arrays and loops it replaces spilled). Two rounds
 * per iteration, a -> e -> a, so no lane is copied. */
static void keccak_p12(uint64_t s[25]) {
    uint64_t a00 = s[0], a01 = s[1], a02 = s[2], a03 = s[3], a04 = s[4], a05 = s[5], a06 = s[6];
    uint64_t a07 = s[7], a08 = s[8], a09 = s[9], a10 = s[10], a11 = s[11], a12 = s[12];
    uint64_t a13 = s[13], a14 = s[14], a15 = s[15], a16 = s[16], a17 = s[17], a18 = s[18];
    uint64_t a19 = s[19], a20 = s[20], a21 = s[21], a22 = s[22], a23 = s[23], a24 = s[24];
    uint64_t e00, e01, e02, e03, e04, e05, e06, e07, e08, e09, e10, e11, e12, e13, e14, e15;
    uint64_t e16, e17, e18, e19, e20, e21, e22, e23, e24;
    uint64_t c0, c1, c2, c3, c4, d0, d1, d2, d3, d4, b0, b1, b2, b3, b4;
#pragma GCC unroll 6
    for (unsigned round = 0; round < 12; round += 2) {
        KECCAK_ROUND(a, e, ROUND_CONSTANTS_12[round]);
        KECCAK_ROUND(e, a, ROUND_CONSTANTS_12[round + 1]);
    }
    s[0] = a00, s[1] = a01, s[2] = a02, s[3] = a03, s[4] = a04, s[5] = a05, s[6] = a06;
    s[7] = a07, s[8] = a08, s[9] = a09, s[10] = a10, s[11] = a11, s[12] = a12;
    s[13] = a13, s[14] = a14, s[15] = a15, s[16] = a16, s[17] = a17, s[18] = a18;
    s[19] = a19, s[20] = a20, s[21] = a21, s[22] = a22, s[23] = a23, s[24] = a24;
}
#undef ROL
#undef CHI

int ts_init_constants(void) {
    for (unsigned ir = 12; ir < 24; ir++) {
        uint64_t rc = 0;
        for (unsigned j = 0; j <= 6; j++)
            if (lfsr_bit(j + 7 * ir)) rc |= (uint64_t)1 << ((1u << j) - 1);
        if (rc != ROUND_CONSTANTS_12[ir - 12]) return -1;
    }
    /* FIPS 202, algorithm 2: offsets (t+1)(t+2)/2 along (x, y) -> (y, 2x + 3y). */
    unsigned x = 1, y = 0;
    if (RHO[0] != 0) return -1;
    for (unsigned t = 0; t < 24; t++) {
        if (RHO[x + 5 * y] != ((t + 1) * (t + 2) / 2) % 64) return -1;
        unsigned nx = y, ny = (2 * x + 3 * y) % 5;
        x = nx;
        y = ny;
    }
    for (unsigned i = 0; i < 25; i++) {
        unsigned lx = i % 5, ly = i / 5;
        if (PI_DST[i] != ly + 5 * ((2 * lx + 3 * ly) % 5)) return -1;
    }
    /* the written-out permutation against the tables' */
    uint64_t x1[25], x2[25];
    for (unsigned i = 0; i < 25; i++) x1[i] = x2[i] = 0x9E3779B97F4A7C15ULL * (i + 1);
    for (unsigned k = 0; k < 3; k++) {
        keccak_p12(x1);
        keccak_p12_tables(x2);
    }
    return memcmp(x1, x2, sizeof x1) ? -1 : 0;
}

void ts_init(ts_state *s) {
    memset(s->lanes, 0, sizeof s->lanes);
    s->pos = 0;
}

void ts_absorb(ts_state *s, const uint8_t *data, size_t len) {
    uint8_t *bytes = (uint8_t *)s->lanes;
    while (len) {
        size_t take = TS_RATE - s->pos;
        if (take > len) take = len;
        size_t i = 0;
        /* bytes up to a lane boundary, whole lanes, then the bytes left */
        for (; i < take && (s->pos + i) % 8; i++) bytes[s->pos + i] ^= data[i];
        for (; i + 8 <= take; i += 8) {
            uint64_t lane;
            memcpy(&lane, data + i, 8);
            s->lanes[(s->pos + i) / 8] ^= lane;
        }
        for (; i < take; i++) bytes[s->pos + i] ^= data[i];
        s->pos += take;
        data += take;
        len -= take;
        if (s->pos == TS_RATE) {
            keccak_p12(s->lanes);
            s->pos = 0;
        }
    }
}

void ts_finish(ts_state *s, uint8_t domain) {
    uint8_t *bytes = (uint8_t *)s->lanes;
    bytes[s->pos] ^= domain;
    bytes[TS_RATE - 1] ^= 0x80;
    keccak_p12(s->lanes);
    s->pos = 0;
}

void ts_squeeze(ts_state *s, uint8_t *out, size_t len) {
    const uint8_t *bytes = (const uint8_t *)s->lanes;
    while (len) {
        if (s->pos == TS_RATE) {
            keccak_p12(s->lanes);
            s->pos = 0;
        }
        size_t take = TS_RATE - s->pos;
        if (take > len) take = len;
        memcpy(out, bytes + s->pos, take);
        s->pos += take;
        out += take;
        len -= take;
    }
}
