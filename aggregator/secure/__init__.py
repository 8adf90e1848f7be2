"""Secure mode's two roles (leader, helper), split by protocol step (docs/secure-mode.md)."""
