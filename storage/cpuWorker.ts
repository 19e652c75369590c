// Runs inside the piscina worker threads of cpuPool.ts: CPU-bound work (hashing, zstd, NAR ingest
// and the checks of staged uploads) that must not block the server's event loop. Adding a task is one
// entry in `cpuTasks`; its argument and result must survive structured cloning.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { ingestStagedNar } from './nars/ingestTask.js';
import { compressNarFrame, scanStagedReferences, verifyStagedNar } from './nars/frameTasks.js';
import { checkStagedBytes, dropStagedCheck, stagedCheckResult } from './nars/checkTasks.js';
import { checkNarBytes } from './nars/narBytesPass.js';

export interface Sha256FileResult {
  /** Lowercase hex digest, as sha256sum prints it. */
  hex: string;
  bytes: number;
}

async function sha256File(path: string): Promise<Sha256FileResult> {
  const hash = createHash('sha256');
  let bytes = 0;
  // 1 MiB reads: fewer round trips to the thread pool than the 64 KiB default on large NARs.
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { hex: hash.digest('hex'), bytes };
}

export const cpuTasks = {
  sha256File,
  ingestStagedNar,
  compressNarFrame,
  verifyStagedNar,
  scanStagedReferences,
  checkStagedBytes,
  stagedCheckResult,
  dropStagedCheck,
  checkNarBytes,
} satisfies Record<string, (input: never) => Promise<unknown>>;

export type CpuTasks = typeof cpuTasks;
export type CpuTaskName = keyof CpuTasks;
export type CpuTaskInput<K extends CpuTaskName> = Parameters<CpuTasks[K]>[0];
export type CpuTaskOutput<K extends CpuTaskName> = Awaited<ReturnType<CpuTasks[K]>>;

/** What cpuPool.ts posts to a worker for each task. */
export interface CpuTaskMessage {
  task: string;
  input: unknown;
}

// piscina calls the default export with each posted message.
export default function runCpuTask(message: CpuTaskMessage): Promise<unknown> {
  if (!Object.hasOwn(cpuTasks, message.task)) {
    throw new Error(`unknown CPU task "${message.task}"; known tasks: ${Object.keys(cpuTasks).join(', ')}`);
  }
  const run = cpuTasks[message.task as CpuTaskName] as (input: unknown) => Promise<unknown>;
  return run(message.input);
}
