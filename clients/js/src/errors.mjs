// A query, a parameter or a location the device refuses (docs/device-protocol.md, section 9).
export class Refused extends Error {
  constructor(message) {
    super(message);
    this.name = 'Refused';
  }
}
