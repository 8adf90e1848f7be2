// A fleet of JS devices at known places: the truth a release is checked against.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { COL_DEGREES, HALF, ORIGIN_LAT, ORIGIN_LON, ROW_DEGREES, SIDE, locateGrid } from '../src/geo.mjs';

export const PARIS_CELL = locateGrid(48.8584, 2.2945);

/** The 3 x 3 block of grid cells around Paris's cell, row-major. */
export function gridBlock(center = PARIS_CELL) {
  const side = BigInt(SIDE);
  const out = [];
  for (const dr of [-1n, 0n, 1n]) for (const dc of [-1n, 0n, 1n]) out.push(center + dr * side + dc);
  return out;
}

export function cellCenter(cell) {
  const row = Number(cell / BigInt(SIDE));
  const col = Number(cell % BigInt(SIDE));
  return [ORIGIN_LAT + (row - HALF + 0.5) * ROW_DEGREES, ORIGIN_LON + (col - HALF + 0.5) * COL_DEGREES];
}

/** Positions: counts[i] devices at targets[i]'s centre, then `others` devices at no target. */
export function placements(targets, counts, others) {
  const out = [];
  targets.forEach((cell, i) => {
    for (let k = 0; k < counts[i]; k++) out.push({ cell, at: cellCenter(cell) });
  });
  const elsewhere = targets[targets.length - 1] + 10n * BigInt(SIDE);
  for (let k = 0; k < others; k++) out.push({ cell: elsewhere, at: cellCenter(elsewhere) });
  return out;
}

/** The `fleet run --json` shape the Python CLI's `release --truth` reads. */
export function writeTruth(dir, targets, counts) {
  const file = path.join(dir, 'truth.json');
  const ground_truth = targets.map((cell, i) => ({ location_id: cell.toString(), true_count: counts[i] }));
  fs.writeFileSync(file, JSON.stringify({ ground_truth }));
  return file;
}

/**
 * The release (the Python CLI's JSON) against the truth: every estimate within 4 standard
 * errors of the true count (exactly it where the error is 0), and the 95% intervals holding it for at least 7 of 9 cells (the
 * fleets are seeded, so the outcome is fixed; these bounds say how far off it may be).
 */
export function checkAgainstTruth(release, targets, counts) {
  const byCell = new Map(release.estimates.map((e) => [String(e.location_id), e]));
  let inside = 0;
  targets.forEach((cell, i) => {
    const e = byCell.get(cell.toString());
    assert.ok(e, `no estimate for ${cell}`);
    const off = Math.abs(e.estimate - counts[i]);
    const z = e.std_error > 0 ? off / e.std_error : off === 0 ? 0 : Infinity;
    assert.ok(z <= 4, `cell ${cell}: estimate ${e.estimate} vs truth ${counts[i]} (${z.toFixed(2)} standard errors)`);
    if (e.ci_low <= counts[i] && counts[i] <= e.ci_high) inside += 1;
  });
  assert.ok(inside >= targets.length - 2, `${inside} of ${targets.length} intervals hold the truth`);
  return inside;
}
