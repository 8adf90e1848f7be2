// A device's state: per query its draw, pseudonym, report ids, tokens and acknowledgements,
// saved atomically (temp file, fsync, rename) before anything is sent (section 4).
import fs from 'node:fs';

const FORMAT = 'ldpcollect-js.device-state/1';

export class DeviceState {
  constructor(path, queries = {}) {
    this.path = path;
    this.queries = queries;
  }

  static open(path) {
    if (!fs.existsSync(path)) return new DeviceState(path);
    const data = JSON.parse(fs.readFileSync(path, 'utf8'));
    if (data.format !== FORMAT) throw new Error(`${path} is not a ${FORMAT} file`);
    return new DeviceState(path, data.queries ?? {});
  }

  save() {
    const tmp = `${this.path}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify({ format: FORMAT, queries: this.queries }, null, 1));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.path);
  }
}
