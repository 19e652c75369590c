// What this worker's Nix store built, and the keys the inputs of each build rested on (docs/builds.md,
// "The shared store"): in memory, and in `<worker.baseDir>/built-paths.jsonl` (one JSON line a
// path) across restarts. StoreTrust takes a path built here as it is for a job that trusts all of
// those keys. The file is appended to as builds end and written anew now and then, keeping the
// paths still valid in the store.
import { appendFile, mkdir, open as openFile, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { DEFAULT_STORE_DIR, parseStorePath, toNix32Hash } from '../protocol/index.js';
import type { RunOptions } from './childProcess.js';
import { BoundedMap } from './boundedMap.js';
import { PATHS_PER_CALL, validOf } from './nixCli.js';

const LedgerLine = z.object({ path: z.string(), narHash: z.string(), keys: z.array(z.string()) });

/**
 * Built paths kept in memory (the ledger's entries). Past it the least recently used go, from the
 * ledger too at its next rewrite: such a path is looked up in the job's caches, else let go of and
 * built again.
 */
const BUILT_ENTRIES = 100_000;
/**
 * The ledger is written anew (keeping the paths still valid, as held in memory) at start and once it
 * has grown by this many lines and by as many as the last rewrite kept: a rewrite's cost (a validity
 * query of every path in it) is spread over at least as many appends.
 */
export const LEDGER_COMPACT_LINES = 10_000;
/** How long one validity query of the ledger's rewrite may take: a Nix that hangs fails the rewrite, not the builds. */
const LEDGER_QUERY_TIMEOUT_MS = 120_000;

const entry = (path: string, narHash: string) => `${path} ${narHash}`;

export class BuiltPathsLedger {
  /** built here: path and NAR hash → the keys its inputs rested on (the ledger, in memory) */
  private readonly built = new BoundedMap<string, string[]>(BUILT_ENTRIES);
  /** lines in the ledger file, and how many the last rewrite kept (or, after one failed, the lines then: the next waits as long again) */
  private ledgerLines = 0;
  private ledgerKept = 0;
  /** the file's last line was cut short (a crash): the next append starts on a line of its own */
  private ledgerCut = false;
  /** appends and a rewrite's writing, one at a time: a line appended is in the file the rewrite renames, or after it */
  private ledgerWrites: Promise<void> = Promise.resolve();
  /** while a rewrite queries validity: the lines appended since it took its snapshot, which it writes too */
  private appendedDuringRewrite: string[] | null = null;
  private compacting = false;

  /**
   * `file`: where the entries are kept across restarts; null: in memory only. `run`: how the
   * rewrite asks Nix which of its paths are still valid, each call given `queryTimeoutMs`.
   */
  constructor(private readonly file: string | null, private readonly run: RunOptions = { env: process.env }, private readonly queryTimeoutMs = LEDGER_QUERY_TIMEOUT_MS) {}

  /** Reads the file, and starts writing it anew; a missing or damaged line only makes those paths unknown. */
  async load(): Promise<void> {
    if (this.file === null) return;
    const text = await readFile(this.file, 'utf8').catch(() => '');
    this.ledgerCut = text !== '' && !text.endsWith('\n');
    const storeDir = this.run.env['NIX_STORE_DIR'] ?? DEFAULT_STORE_DIR;
    for (const line of text.split('\n')) {
      if (!line) continue;
      this.ledgerLines++;
      try {
        const parsed = LedgerLine.safeParse(JSON.parse(line));
        // a path that is not one of this store's (a hand-edited line, another store directory) is dropped: Nix would refuse the rewrite's query of it
        if (parsed.success && parseStorePath(parsed.data.path, storeDir).ok) this.built.set(entry(parsed.data.path, parsed.data.narHash), parsed.data.keys);
      } catch {
        // a line cut short by a crash: that path is unknown, so looked up or built again
      }
    }
    // not awaited: the first job does not wait for a validity query of every path in the ledger
    if (this.ledgerLines > 0) this.compactInBackground();
  }

  /** The keys the inputs of this path, built here, rested on; undefined: not known to be built here. */
  keysOf(path: string, narHash: string): string[] | undefined {
    return this.built.get(entry(path, narHash));
  }

  /** Records outputs built here from inputs whose acceptance rested on `keys`. */
  async record(outputs: readonly { path: string; narHash: string }[], keys: readonly string[]): Promise<void> {
    const lines: string[] = [];
    for (const output of outputs) {
      const narHash = toNix32Hash(output.narHash, 'sha256') ?? output.narHash;
      this.built.set(entry(output.path, narHash), [...keys]);
      lines.push(JSON.stringify({ path: output.path, narHash, keys }));
    }
    const file = this.file;
    if (file === null || lines.length === 0) return;
    // waits for a rewrite's writing (a rename), never for its validity query
    await this.ledgerWrite(async () => {
      await mkdir(dirname(file), { recursive: true });
      this.appendedDuringRewrite?.push(...lines.map((line) => `${line}\n`));
      const text = `${this.ledgerCut ? '\n' : ''}${lines.join('\n')}\n`;
      // a failed append may have left part of a line: the next starts on a line of its own (an empty line is skipped)
      this.ledgerCut = true;
      await appendFile(file, text, { mode: 0o600 });
      this.ledgerCut = false;
      this.ledgerLines += lines.length;
    });
    // not awaited: the job that crossed the mark does not wait for the rewrite
    if (this.ledgerLines - this.ledgerKept > Math.max(LEDGER_COMPACT_LINES, this.ledgerKept)) this.compactInBackground();
  }

  /**
   * Writes the ledger anew (a temporary file renamed over it): one line per path still valid in the
   * store among those held in memory; the others go from memory too. A path Nix let go of or
   * collected is built or substituted again, and what vouches for it then is recorded anew. The
   * validity query runs on a snapshot, appends going on meanwhile; only the writing takes its turn
   * with them, and it writes the lines appended since the snapshot too.
   */
  private async compactLedger(): Promise<void> {
    const file = this.file;
    if (file === null) return;
    const held = [...this.built];
    this.appendedDuringRewrite = [];
    try {
      const valid = new Set(await this.validAmong([...new Set(held.map(([id]) => id.slice(0, id.indexOf(' '))))]));
      const kept: string[] = [];
      for (const [id, keys] of held) {
        const [path, narHash] = id.split(' ');
        if (valid.has(path!)) kept.push(`${JSON.stringify({ path, narHash, keys })}\n`);
        // unless built again meanwhile (a new entry, its line appended since the snapshot)
        else if (this.built.get(id) === keys) this.built.delete(id);
      }
      await this.ledgerWrite(async () => {
        const lines = [...kept, ...this.appendedDuringRewrite!];
        await mkdir(dirname(file), { recursive: true });
        await writeDurably(file, lines.join(''));
        this.ledgerLines = lines.length;
        this.ledgerKept = kept.length;
        this.ledgerCut = false;
      });
    } finally {
      this.appendedDuringRewrite = null;
    }
  }

  /**
   * The valid ones among these paths, PATHS_PER_CALL a query, each with a timeout. A batch Nix
   * refuses is split until the path it refuses is found, which counts as not valid (its line goes).
   */
  private async validAmong(paths: readonly string[]): Promise<string[]> {
    const valid: string[] = [];
    const query = async (batch: readonly string[]): Promise<void> => {
      const timeout = AbortSignal.timeout(this.queryTimeoutMs);
      try {
        valid.push(...(await validOf(batch, { ...this.run, signal: this.run.signal ? AbortSignal.any([this.run.signal, timeout]) : timeout })));
      } catch (e) {
        if (timeout.aborted || this.run.signal?.aborted) throw e;
        if (batch.length === 1) return;
        const half = Math.ceil(batch.length / 2);
        await query(batch.slice(0, half));
        await query(batch.slice(half));
      }
    };
    for (let i = 0; i < paths.length; i += PATHS_PER_CALL) await query(paths.slice(i, i + PATHS_PER_CALL));
    return valid;
  }

  /**
   * A rewrite unless one is under way; one that fails leaves the file as it was (the temporary file
   * is renamed only once written), and the next waits for as many appends as the file holds then.
   */
  private compactInBackground(): void {
    if (this.compacting) return;
    this.compacting = true;
    void this.compactLedger()
      .catch(() => {
        this.ledgerKept = this.ledgerLines;
      })
      .finally(() => (this.compacting = false));
  }

  private ledgerWrite(write: () => Promise<void>): Promise<void> {
    const done = this.ledgerWrites.then(write);
    this.ledgerWrites = done.catch(() => undefined);
    return done;
  }

}

/** Writes `file` anew through `<file>.new`, on disk before the rename and the rename on disk after: a crash leaves one or the other whole. */
async function writeDurably(file: string, text: string): Promise<void> {
  const handle = await openFile(`${file}.new`, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(`${file}.new`, file);
  const directory = await openFile(dirname(file), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}
