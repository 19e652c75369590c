// Who this worker is and what it offers: its stable id, its peer tokens, and the host facts the
// hello message carries.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, statfs, writeFile } from 'node:fs/promises';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { parsePeersFile, type LoadMetrics, type PeerTokens } from '../protocol/index.js';
import { nix } from './nixCli.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** worker.id, or the id kept in <baseDir>/worker-id, created on first start. */
export async function loadWorkerId(baseDir: string, configured: string | null): Promise<string> {
  if (configured !== null) return configured.toLowerCase();
  const file = join(baseDir, 'worker-id');
  const existing = await readFile(file, 'utf8').then((text) => text.trim(), () => undefined);
  if (existing !== undefined) {
    if (!UUID.test(existing)) throw new Error(`${file} does not hold a UUID; delete it to get a new id, or set worker.id`);
    return existing.toLowerCase();
  }
  await mkdir(baseDir, { recursive: true, mode: 0o700 });
  const id = randomUUID();
  await writeFile(file, `${id}\n`, { mode: 0o600 });
  return id;
}

/** worker.peersFile, parsed; null when none is configured (open mode). */
export async function readPeers(file: string | null): Promise<PeerTokens | null> {
  if (file === null) return null;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read worker.peersFile ${file}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  const parsed = parsePeersFile(text);
  if (!parsed.ok) throw new Error(`worker.peersFile ${file}, ${parsed.field}: ${parsed.reason}`);
  return parsed.value;
}

const ShownConfig = z.object({ 'system-features': z.object({ value: z.array(z.string()) }) });

/** The system features Nix is configured with (`nix show-config`); empty when Nix cannot say. */
export async function detectSystemFeatures(env: NodeJS.ProcessEnv): Promise<string[]> {
  const result = await nix(['show-config', '--json'], { env });
  if (result.exitCode !== 0) return [];
  const parsed = ShownConfig.safeParse(JSON.parse(result.stdout));
  return parsed.success ? parsed.data['system-features'].value.filter((f) => /^[A-Za-z0-9_.+-]{1,64}$/.test(f)) : [];
}

export const hostCores = (): number => Math.max(1, cpus().length);
export const hostMemoryBytes = (): number => totalmem();

/** The heartbeat's load; the store's free space is sampled separately (it needs a syscall that may block). */
export function loadMetrics(runningBuilds: number, runningEvals: number, storeFreeBytes: number | null): LoadMetrics {
  return {
    runningBuilds,
    runningEvals,
    load1: Math.max(0, loadavg()[0] ?? 0),
    memoryFreeBytes: freemem(),
    memoryTotalBytes: totalmem(),
    storeFreeBytes,
  };
}

export async function storeFreeBytes(storeDir = '/nix/store'): Promise<number | null> {
  try {
    const stats = await statfs(storeDir);
    return stats.bavail * stats.bsize;
  } catch {
    return null;
  }
}
