// A request body received whole into a file before anything acts on it, hashed on the way in: S3
// acts on a PUT only once all its bytes arrived, and checks them against x-amz-content-sha256.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export interface ReceivedBody {
  file: string;
  size: number;
  sha256: string;
  md5: string;
}

export async function receiveBody(request: IncomingMessage, dir: string): Promise<ReceivedBody> {
  const file = join(dir, `body-${randomBytes(8).toString('hex')}`);
  const sha256 = createHash('sha256');
  const md5 = createHash('md5');
  let size = 0;
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sha256.update(chunk);
      md5.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    // A client that goes away mid-body ends the request early without an error: count the bytes.
    await pipeline(request, hashing, createWriteStream(file));
    const declared = request.headers['content-length'];
    if (!request.complete || (declared !== undefined && Number(declared) !== size)) throw new Error('the client closed the request before its body ended');
  } catch (error) {
    await unlink(file).catch(() => undefined);
    throw error;
  }
  return { file, size, sha256: sha256.digest('hex'), md5: md5.digest('hex') };
}
