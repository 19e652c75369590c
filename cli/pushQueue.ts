// The queue of `kiln push --from-hook` and `kiln watch-store` (docs/cli.md, "Pushing what Nix
// builds"): a text file of store paths, one a line, that Nix's post-build-hook appends to (one
// short O_APPEND write per build, so the hook never waits on the network and never loses a path
// when kiln or the server is down), and beside it `<queue>.offset`, how far the watcher has
// uploaded, replaced atomically (write, then rename) after each path. A watcher killed at any
// moment starts again at the first path it had not finished; a path it had finished is never
// read again, and one it was uploading is found present or resumed (the upload is resumable).
// A drained queue over COMPACT_BYTES is renamed aside, its late appends read, then removed.
// Nix 2.8 hands its post-build-hook an empty OUT_PATHS; the hook then queues `<DRV_PATH>!*`
// ("every output of"), which the watcher resolves with nix-store --query --outputs.
import { appendFile, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

const COMPACT_BYTES = 1024 * 1024;
const STORE_PATH = /^\/nix\/store\/[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+\-._?=]+$/;

/** The default queue: $XDG_STATE_HOME/kiln/push-queue (~/.local/state/kiln/push-queue). */
export function defaultQueueFile(): string {
  const state = process.env['XDG_STATE_HOME'] || join(homedir(), '.local', 'state');
  return join(state, 'kiln', 'push-queue');
}

/** Appends paths (a hook's OUT_PATHS); anything that is not a store path is refused with its text. */
export async function enqueue(file: string, paths: readonly string[]): Promise<void> {
  const bad = paths.find((p) => !isQueueEntry(p));
  if (bad !== undefined) throw new Error(`${JSON.stringify(bad.slice(0, 200))} is not a store path`);
  if (paths.length === 0) return;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  // one write: concurrent hooks' lines do not interleave
  await appendFile(file, paths.map((p) => `${p}\n`).join(''), { mode: 0o600 });
}

export class PushQueue {
  constructor(readonly file: string) {}

  private get offsetFile(): string {
    return `${this.file}.offset`;
  }

  async offset(): Promise<number> {
    const text = await readFile(this.offsetFile, 'utf8').catch(() => '0');
    const n = Number(text.trim());
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  }

  /** Whole lines after the recorded offset (a line still being written waits for its newline). */
  async pending(): Promise<{ start: number; lines: { path: string; end: number }[] }> {
    const start = await this.offset();
    const handle = await open(this.file, 'r').catch(() => null);
    if (handle === null) return { start, lines: [] };
    try {
      const { size } = await handle.stat();
      if (size <= start) return { start, lines: [] };
      const buffer = Buffer.alloc(size - start);
      await handle.read(buffer, 0, buffer.length, start);
      const lines: { path: string; end: number }[] = [];
      let at = 0;
      for (let nl = buffer.indexOf(10); nl !== -1; nl = buffer.indexOf(10, at)) {
        const path = buffer.subarray(at, nl).toString('utf8').trim();
        at = nl + 1;
        lines.push({ path, end: start + at });
      }
      return { start, lines };
    } finally {
      await handle.close();
    }
  }

  /** Records that everything before `end` is done: written aside, then renamed over the old offset. */
  async done(end: number): Promise<void> {
    const temporary = `${this.offsetFile}.${process.pid}`;
    await writeFile(temporary, `${end}\n`, { mode: 0o600 });
    await rename(temporary, this.offsetFile);
  }

  /**
   * A drained, large queue starts afresh. The file is renamed first, so a hook writes to a new
   * one; lines a hook appended to the old one in between go into the new one.
   */
  async compact(): Promise<void> {
    const size = await stat(this.file).then((s) => s.size, () => 0);
    const offset = await this.offset();
    if (size < COMPACT_BYTES || offset < size) return;
    const aside = `${this.file}.compacting`;
    await rename(this.file, aside);
    await this.done(0);
    const late = (await readFile(aside)).subarray(offset).toString('utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '');
    // the late lines go back into the new queue first, so a crash here loses none
    if (late.length > 0) await appendFile(this.file, late.map((p) => `${p}\n`).join(''), { mode: 0o600 });
    await rm(aside, { force: true });
  }
}

export const isStorePath = (text: string): boolean => STORE_PATH.test(text);

/** A queued derivation whose outputs are meant: `<drv>!*`; the .drv path, or null. */
export const outputsOf = (entry: string): string | null => (entry.endsWith('.drv!*') && isStorePath(entry.slice(0, -2)) ? entry.slice(0, -2) : null);

const isQueueEntry = (entry: string): boolean => isStorePath(entry) || outputsOf(entry) !== null;
