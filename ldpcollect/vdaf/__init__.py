"""Verifiable distributed aggregation (draft-irtf-cfrg-vdaf-20): the fields, the XOF, the
FLP and Prio3 that the two-aggregator secure mode builds on. Standard library and
pycryptodome only; no roles, transport or storage here."""
