// The trusted mode's report (docs/device-protocol.md, section 5), rebuilt from saved state.
import { encode } from './proto.mjs';

/** The Report object for one round of a saved query record. */
export function reportOf(record, round) {
  const report = {
    query_id: record.queryId,
    round,
    device_pseudonym: Buffer.from(record.pseudonym, 'hex'),
    report_id: Buffer.from(record.reportIds[round - 1], 'hex'),
    answers: Buffer.from(record.answers[round - 1], 'hex'),
  };
  const token = record.tokens?.[round - 1];
  if (token) report.token = Buffer.from(token, 'hex');
  return report;
}

export const encodeSubmit = (report) => encode('SubmitReportRequest', { report });
