// A build job's private substituters come with a read token (docs/builds.md, "Private caches in
// build jobs"); Nix reads HTTP credentials from a netrc file, one entry per host. The file lives
// in a private directory for the job's duration only.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Substituter } from '../protocol/index.js';

/** netrc text for the substituters that carry a password; empty when none does. */
export function netrcFor(substituters: readonly Substituter[]): string {
  const byHost = new Map<string, string>();
  for (const s of substituters) if (s.password !== undefined) byHost.set(new URL(s.url).hostname, s.password);
  return [...byHost].map(([host, password]) => `machine ${host} login kiln password ${password}\n`).join('');
}

export interface JobNetrc {
  /** null when no substituter needs credentials */
  path: string | null;
  remove(): Promise<void>;
}

export async function writeJobNetrc(substituters: readonly Substituter[]): Promise<JobNetrc> {
  const text = netrcFor(substituters);
  if (text === '') return { path: null, remove: async () => undefined };
  const dir = await mkdtemp(join(tmpdir(), 'kiln-netrc-'));
  const path = join(dir, 'netrc');
  await writeFile(path, text, { mode: 0o600 });
  return { path, remove: () => rm(dir, { recursive: true, force: true }) };
}
