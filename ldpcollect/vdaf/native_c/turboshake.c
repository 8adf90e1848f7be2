#include "turboshake.h"

#include <string.h>

/* The tables, as constants so the compiler can unroll the permutation with immediate
 * rotations; `ts_init_constants` re-derives them from the specification and refuses to
 * start if one differs. */
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
    return 0;
}

static inline uint64_t rotl(uint64_t v, unsigned n) {
    return n ? (v << n) | (v >> (64 - n)) : v;
}

/* Keccak-p[1600, 12]: the last 12 rounds of Keccak-f[1600]. */
static void keccak_p12(uint64_t a[25]) {
    uint64_t c[5], d[5], b[25];
    for (unsigned round = 0; round < 12; round++) {
#pragma GCC unroll 5
        for (unsigned x = 0; x < 5; x++) c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
#pragma GCC unroll 5
        for (unsigned x = 0; x < 5; x++) d[x] = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1);
#pragma GCC unroll 25
        for (unsigned i = 0; i < 25; i++) b[PI_DST[i]] = rotl(a[i] ^ d[i % 5], RHO[i]);
#pragma GCC unroll 25
        for (unsigned i = 0; i < 25; i++) {
            unsigned x = i % 5, row = i - x;
            a[i] = b[i] ^ (~b[row + (x + 1) % 5] & b[row + (x + 2) % 5]);
        }
        a[0] ^= ROUND_CONSTANTS_12[round];
    }
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
        if (s->pos % 8 == 0) { /* whole lanes at a time */
            for (; i + 8 <= take; i += 8) {
                uint64_t lane;
                memcpy(&lane, data + i, 8);
                s->lanes[(s->pos + i) / 8] ^= lane;
            }
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
