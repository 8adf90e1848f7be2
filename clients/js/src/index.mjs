// The JavaScript ldpcollect device (docs/device-protocol.md).
export { Device } from './device.mjs';
export { Refused } from './errors.mjs';
export { locate, locateGrid, locateH3, schemeFromText, OUTSIDE } from './geo.mjs';
export { draw, pack, unpack } from './mechanisms.mjs';
export { queryInfo } from './query.mjs';
export { OS_RANDOM, ScriptedRandom, bernoulli } from './random.mjs';
export { DEFAULT_POLICY, nextDelay, pushbackSeconds, withRetry } from './retry.mjs';
export { fetchHelperConfig, readPinnedConfig, sealDraw, secureQueryInfo } from './secure.mjs';
export { v1 } from './proto.mjs';
