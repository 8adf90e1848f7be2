// The wire contract, loaded at run time from the repository's proto/ directory.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

export const PROTO_DIR =
  process.env.LDPCOLLECT_PROTO_DIR ??
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../proto');

const FILES = ['ldpcollect/v1/ldpcollect.proto', 'ldpcollect/v1/secure.proto', 'ldpcollect/v1/issuer.proto', 'ldpcollect/v1/aggregation.proto'];

export const OBJECT_OPTIONS = { keepCase: true, longs: String, enums: String, bytes: Buffer, defaults: true, oneofs: true };

const definition = protoLoader.loadSync(FILES, { ...OBJECT_OPTIONS, includeDirs: [PROTO_DIR] });
export const v1 = grpc.loadPackageDefinition(definition).ldpcollect.v1;

const root = new protobuf.Root();
root.resolvePath = (_origin, target) =>
  target.startsWith('google/protobuf/') ? target : path.join(PROTO_DIR, target);
root.loadSync(FILES, { keepCase: true });

/** A message type by name, e.g. type('Query'). */
export const type = (name) => root.lookupType(`ldpcollect.v1.${name}`);

export function decode(name, bytes) {
  const t = type(name);
  return t.toObject(t.decode(bytes), OBJECT_OPTIONS);
}

export function encode(name, object) {
  const t = type(name);
  return Buffer.from(t.encode(t.fromObject(object)).finish());
}
