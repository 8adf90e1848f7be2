// A position to a location id (docs/device-protocol.md, section 3).
import { latLngToCell } from 'h3-js';
import { Refused } from './errors.mjs';

export const ORIGIN_LAT = 48.8584;
export const ORIGIN_LON = 2.2945;
export const ROW_DEGREES = 0.0021709737471568547;
export const COL_DEGREES = 0.003299742339056717;
export const HALF = 31667.0;
export const SIDE = 63334;
export const OUTSIDE = (1n << 64n) - 1n;

export function checkPoint(lat, lon) {
  if (typeof lat !== 'number' || typeof lon !== 'number' || Number.isNaN(lat) || Number.isNaN(lon)) {
    throw new Refused(`a position is two numbers of degrees, got ${lat}, ${lon}`);
  }
  if (!(lat >= -90 && lat <= 90)) throw new Refused(`lat ${lat} is not in [-90, 90]`);
  if (!(lon >= -180 && lon <= 180)) throw new Refused(`lon ${lon} is not in [-180, 180]`);
}

const wrap = (d) => {
  let m = (d + 180) % 360;
  if (m < 0) m += 360;
  return m - 180;
};

/** The grid cell id (BigInt), or OUTSIDE. */
export function locateGrid(lat, lon) {
  checkPoint(lat, lon);
  if (Math.abs(lat) === 90) lon = ORIGIN_LON;
  const row = Math.floor((lat - ORIGIN_LAT) / ROW_DEGREES + HALF);
  const col = Math.floor(wrap(lon - ORIGIN_LON) / COL_DEGREES + HALF);
  if (row < 0 || row >= SIDE || col < 0 || col >= SIDE) return OUTSIDE;
  return BigInt(row) * BigInt(SIDE) + BigInt(col);
}

export function locateH3(lat, lon, resolution) {
  checkPoint(lat, lon);
  return BigInt('0x' + latLngToCell(lat, lon, resolution));
}

/** scheme: {kind: 'grid'} or {kind: 'h3', resolution}. */
export function locate(scheme, lat, lon) {
  return scheme.kind === 'grid' ? locateGrid(lat, lon) : locateH3(lat, lon, scheme.resolution);
}

/** "grid" or "h3:<res>" (the text an app configures for a secure query). */
export function schemeFromText(text) {
  if (text === 'grid') return { kind: 'grid' };
  const m = /^h3:(\d{1,2})$/.exec(text);
  if (m && Number(m[1]) <= 15) return { kind: 'h3', resolution: Number(m[1]) };
  throw new Refused(`location scheme ${JSON.stringify(text)} is not "grid" or "h3:<0..15>"`);
}
