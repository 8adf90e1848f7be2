"""Device admission: Privacy Pass publicly verifiable tokens (blind RSA, token type 2).

An enrolled device obtains at most K tokens per epoch from the operator's issuer, which signs
blinded messages only; a report carries one token bound to its query and round, and anyone
with the published key can verify it without learning which device it was issued to. This
package is the cryptography and wire format, shared by devices, the issuer and aggregators;
it imports only the standard library and `cryptography`. See docs/admission.md.
"""
