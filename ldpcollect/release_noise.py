"""Which release-noise sigma a query may ask for: refused at creation what can never be released.

A release computes the discrete Gaussian's privacy profile (work and memory grow with sigma)
and samples noise for every round count. Below NOISE_SIGMA_MIN the noise is zero with
overwhelming probability (sigma 1/10: P(noise != 0) < 1e-21) and rho = 1/(2 sigma^2) heads for
overflow (sigma 1e-300 made every release fail); above NOISE_SIGMA_MAX the privacy profile takes
longer than a release may (sigma 3000: ~10 s, 10^4: minutes, 10^6: never finished). Both ends
were accepted at creation before, leaving a query that could never be released.
"""

from __future__ import annotations

from fractions import Fraction

from ldpcollect.errors import ParameterError

NOISE_SIGMA_MIN = Fraction(1, 10)
NOISE_SIGMA_MAX = Fraction(1000)
NOISE_SIGMA_RANGE = f"[{NOISE_SIGMA_MIN}, {NOISE_SIGMA_MAX}]"


def validate_noise_sigma(sigma: Fraction, parameter: str = "noise sigma") -> Fraction:
    if not NOISE_SIGMA_MIN <= sigma <= NOISE_SIGMA_MAX:
        detail = (
            "smaller noise is zero almost surely: omit --noise-sigma for none"
            if sigma < NOISE_SIGMA_MIN
            else "larger noise makes the release's privacy profile too costly to compute"
        )
        raise ParameterError(parameter, str(sigma), NOISE_SIGMA_RANGE, detail)
    return sigma
