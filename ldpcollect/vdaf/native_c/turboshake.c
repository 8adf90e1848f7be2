#include "turboshake.h"

#include <string.h>

static uint64_t round_constants[24];
static unsigned rho_offsets[25];

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

void ts_init_constants(void) {
    for (unsigned ir = 0; ir < 24; ir++) {
        uint64_t rc = 0;
        for (unsigned j = 0; j <= 6; j++)
            if (lfsr_bit(j + 7 * ir)) rc |= (uint64_t)1 << ((1u << j) - 1);
        round_constants[ir] = rc;
    }
    /* FIPS 202, algorithm 2: offsets (t+1)(t+2)/2 along (x, y) -> (y, 2x + 3y). */
    unsigned x = 1, y = 0;
    rho_offsets[0] = 0;
    for (unsigned t = 0; t < 24; t++) {
        rho_offsets[x + 5 * y] = ((t + 1) * (t + 2) / 2) % 64;
        unsigned nx = y, ny = (2 * x + 3 * y) % 5;
        x = nx;
        y = ny;
    }
}

static inline uint64_t rotl(uint64_t v, unsigned n) {
    return n ? (v << n) | (v >> (64 - n)) : v;
}

/* Keccak-p[1600, 12]: the last 12 rounds of Keccak-f[1600]. */
static void keccak_p12(uint64_t a[25]) {
    uint64_t c[5], d[5], b[25];
    for (unsigned round = 12; round < 24; round++) {
        for (unsigned x = 0; x < 5; x++) c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
        for (unsigned x = 0; x < 5; x++) d[x] = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1);
        for (unsigned i = 0; i < 25; i++) a[i] ^= d[i % 5];
        for (unsigned y = 0; y < 5; y++)
            for (unsigned x = 0; x < 5; x++)
                b[y + 5 * ((2 * x + 3 * y) % 5)] = rotl(a[x + 5 * y], rho_offsets[x + 5 * y]);
        for (unsigned y = 0; y < 5; y++)
            for (unsigned x = 0; x < 5; x++)
                a[x + 5 * y] = b[x + 5 * y] ^ (~b[(x + 1) % 5 + 5 * y] & b[(x + 2) % 5 + 5 * y]);
        a[0] ^= round_constants[round];
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
        for (size_t i = 0; i < take; i++) bytes[s->pos + i] ^= data[i];
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
