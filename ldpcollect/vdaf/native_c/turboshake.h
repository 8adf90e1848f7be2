/* TurboSHAKE128 (RFC 9861): the Keccak-p[1600, 12 rounds] sponge at rate 168 bytes, written
 * from the FIPS 202 / RFC 9861 definitions. The round constants and rotation offsets are
 * checked at start-up against the specification's LFSR and (x, y) walk.
 * Lanes are little-endian, so the state is XORed and read as bytes on this (little-endian)
 * machine. */
#ifndef LDPCOLLECT_TURBOSHAKE_H
#define LDPCOLLECT_TURBOSHAKE_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the sponge reads lanes as little-endian bytes"
#endif

#define TS_RATE 168

typedef struct {
    uint64_t lanes[25];
    size_t pos;
} ts_state;

/* Checks the permutation's constant tables against the specification: 0, or -1. */
int ts_init_constants(void);
void ts_init(ts_state *s);
void ts_absorb(ts_state *s, const uint8_t *data, size_t len);
/* Pads with the domain separation byte and switches to squeezing. */
void ts_finish(ts_state *s, uint8_t domain);
void ts_squeeze(ts_state *s, uint8_t *out, size_t len);

#endif
