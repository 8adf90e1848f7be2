"""The two-aggregator secure mode's shared core: HPKE sealing of shares to each aggregator,
a device's sealed upload for one round, and the pure verify/aggregate/unshard steps both
roles run. Builds on `ldpcollect.vdaf`; no roles, transport or storage here."""
