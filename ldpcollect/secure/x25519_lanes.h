/* Eight X25519s (RFC 7748) at once, each lane its own scalar and u-coordinate, in the eight
 * 64-bit lanes of AVX-512 registers with the IFMA multiply-add (radix 2^52). A server opening
 * a batch of HPKE ciphertexts computes its own private key with each ciphertext's ephemeral
 * key; a fleet sealing a batch, each ephemeral key with the base point and with the
 * recipient's key. One call costs about what three of OpenSSL's one-at-a-time calls cost
 * (bench.secure prints both); OpenSSL stays the reference and the fallback where the CPU
 * lacks IFMA. */
#ifndef LDPCOLLECT_X25519_LANES_H
#define LDPCOLLECT_X25519_LANES_H

#define X25519_LANES 8

/* 1 when this CPU (and its operating system) runs the eight-lane kernel. */
int x25519_lanes_available(void);

/* out[i] = X25519(scalars[i], u[i]) for the eight lanes (each scalar clamped here, each u's
 * top bit ignored, as RFC 7748 says); per lane 1, or 0 when the result is all zeros (a
 * low-order point: HPKE's DH fails, RFC 9180 7.1.4). Only for x25519_lanes_available(). */
void x25519_lanes(unsigned char out[X25519_LANES][32], int ok[X25519_LANES],
                  const unsigned char scalars[X25519_LANES][32],
                  const unsigned char u[X25519_LANES][32]);

#endif
