// The check passes of the chunked uploads being received, as tasks of a CPU pool of exactly one
// thread (stagedChecks.ts makes it): the states live in that thread's memory, and one thread runs
// its tasks one at a time (stagedChecks.ts chains each upload's), so each upload's bytes come in order.
// A task run on any other pool finds no state, and its results say so (null): finalize then runs
// the full check pass over the staged file.
import { open } from 'node:fs/promises';
import { StagedCheck, type CheckedNar } from './stagedCheck.js';

/** Uploads followed at once; beyond it the oldest state is dropped (its finalize runs the full pass). */
const MAX_FOLLOWED = 64;

const followed = new Map<string, StagedCheck>();

export interface CheckBytesInput {
  /** the upload (its frames directory names it) */
  upload: string;
  /** the staged file, and the bytes [from, to) of it to check: written, and counted by the upload's row */
  file: string;
  from: number;
  to: number;
}

/** One read buffer for the thread: the check reads every staged byte once, and must not make garbage of it. */
const READ_BYTES = 1 << 20;
let readBuffer: Buffer | null = null;

/** Feeds the upload's check, or starts one at offset 0; a gap drops it. The position reached, or null. */
export async function checkStagedBytes(input: CheckBytesInput): Promise<number | null> {
  let check = followed.get(input.upload);
  if (check === undefined || check.position !== input.from) {
    followed.delete(input.upload);
    if (input.from !== 0) return null;
    check = new StagedCheck();
    followed.set(input.upload, check);
    if (followed.size > MAX_FOLLOWED) followed.delete(followed.keys().next().value!);
  }
  readBuffer ??= Buffer.allocUnsafeSlow(READ_BYTES);
  const source = await open(input.file, 'r');
  try {
    for (let at = input.from; at < input.to; ) {
      const { bytesRead } = await source.read(readBuffer, 0, Math.min(READ_BYTES, input.to - at), at);
      if (bytesRead === 0) {
        // Shorter than the row says (cut back meanwhile): this check can no longer be trusted.
        followed.delete(input.upload);
        return null;
      }
      check.push(readBuffer.subarray(0, bytesRead));
      at += bytesRead;
    }
  } finally {
    await source.close();
  }
  return check.position;
}

/** The upload's check result when it covers exactly `narSize` bytes of a well-formed NAR, else null. */
export async function stagedCheckResult(input: { upload: string; narSize: number }): Promise<CheckedNar | null> {
  return followed.get(input.upload)?.result(input.narSize) ?? null;
}

/** Forgets an upload's check. */
export async function dropStagedCheck(input: { upload: string }): Promise<void> {
  followed.delete(input.upload);
}
