/* Field kernels, written once and instantiated per field: include with FIELD defined as
 * f64 or f128 (see kernels.c). Vectors are arrays in the field's internal form. The ones
 * returning int allocate scratch space: 0, or -1 when memory ran out. */
#define KCAT_(a, b) a##_##b
#define KCAT(a, b) KCAT_(a, b)
#define K(name) KCAT(FIELD, name)
#define T FIELD
#define ADD K(add)
#define SUB K(sub)
#define MUL K(mul)
#define ONE K(one)

T K(pow)(T x, u128 e);
T K(inv)(T x);
/* The principal n-th root of unity (n a power of two no larger than the generator's order). */
T K(nth_root)(size_t n);
/* values[i] <- sum_j values[j] * root^(i j), in place (n a power of two). */
int K(transform)(T *values, size_t n, T root);
/* The same with powers[i] = root^i for i < n / 2 given (a plan cached by the caller). */
void K(transform_powers)(T *values, size_t n, const T *powers);
/* The butterflies alone: bit-reversed in, natural out (dit); natural in, bit-reversed out
 * (dif); and the permutation between the two orders. */
void K(transform_dit)(T *values, size_t n, const T *powers);
void K(transform_dif)(T *values, size_t n, const T *powers);
void K(bit_reverse)(T *values, size_t n);
/* From the values of a polynomial of degree < n at the n-th roots, its values at the odd
 * 2n-th roots s w^i (s the principal 2n-th root), in order: an inverse NTT without its
 * permutation, the coefficients scaled by s^i / n, an NTT without its permutation (no
 * bit-reversal at all). `plan` holds 2n elements from coset_plan. */
void K(coset_plan)(T *plan, size_t n);
void K(coset_values)(T *out, const T *values, size_t n, const T *plan);
/* powers[i] = x^i for i < count. */
void K(powers)(T *powers, size_t count, T x);
/* The monomial coefficients (at most n) to the values at the n-th roots, or with `coset` at
 * s * w^i (s the principal 2n-th root): the draft's ntt(..., set_s). */
int K(ntt)(T *values, size_t n, int coset);
int K(inv_ntt)(T *values, size_t n);
T K(poly_eval)(const T *coeffs, size_t len, T x);
/* c with q(x) = sum_i c[i] q(w^i), for q of degree < n. */
int K(lagrange_weights)(T *out, size_t n, T x);
/* The same with nodes[i] = w^i (i < n) and 1/n given. */
void K(lagrange_weights_nodes)(T *out, size_t n, T x, const T *nodes, T n_inv);
/* From the values at the n-th roots, all 2n values at the 2n-th roots (in order); `tmp`
 * holds n elements. */
int K(double_evaluations)(T *out, const T *values, size_t n, T *tmp);
/* Values at the first m of the n-th roots of a polynomial of degree < m, completed to n. */
int K(extend_values)(T *out, const T *values, size_t m, size_t n);

#undef KCAT_
#undef KCAT
#undef K
#undef T
#undef ADD
#undef SUB
#undef MUL
#undef ONE
