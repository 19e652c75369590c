// Which paths already valid in the worker's Nix store a job may use as they are (docs/builds.md,
// "The shared store"). Organizations share kiln's own workers and so one store: a path another
// organization's job substituted from its own cache (which may hold anything under an
// input-addressed path) must not become this job's input, nor be reported as this job's output.
// A valid path is acceptable for a job when, with the keys the job trusts (its substituters' and
// the worker's own trusted-public-keys, which the operator chose for every tenant):
//   - it is content-addressed, and its path and contents are what its content address says; or
//   - the store holds a signature of it by one of those keys (Nix keeps a substitute's signatures); or
//   - it was built in this store from inputs acceptable under keys all of which the job trusts (the ledger); or
//   - one of the job's substituters holds it, same NAR hash, size and references, signed by its key.
// Each acceptance names the keys it rests on, so the outputs of a build record the union of what
// their inputs rested on, and a later job trusting all of those keys may take them as they are.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { appendFile, lstat, mkdir, open as openFile, readFile, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  contentAddressClaim, DEFAULT_STORE_DIR, formatHash, narinfoFingerprint, parseHash, parseNarinfo, parseStorePath, SigningKey, storePathHashPart, toNix32Hash, VerifyingKey, type Substituter,
} from '../protocol/index.js';
import type { RunOptions } from './childProcess.js';
import { BoundedMap } from './boundedMap.js';
import { nix, nixErrorText, nixStore, validOf } from './nixCli.js';

const LocalInfo = z.array(z.object({
  path: z.string(),
  narHash: z.string(),
  narSize: z.number(),
  references: z.array(z.string()),
  signatures: z.array(z.string()).optional(),
  ca: z.string().optional(),
  ultimate: z.boolean().optional(),
}));
type LocalInfo = z.infer<typeof LocalInfo>[number];

const LedgerLine = z.object({ path: z.string(), narHash: z.string(), keys: z.array(z.string()) });

/** What a job trusts: its substituters (with their keys and read password) and the worker's own keys. */
export interface TrustScope {
  substituters: readonly Substituter[];
  signal?: AbortSignal;
}

export interface Verdict {
  /** the keys the acceptable paths rest on (sorted); a build from them records these for its outputs */
  keys: string[];
  /** valid paths the job may not use: to be deleted before it builds */
  rejected: string[];
  /** how many paths were looked up in the job's caches (not settled by the store alone) */
  lookedUp: number;
}

const NARINFO_LOOKUPS_AT_ONCE = 16;

/**
 * How many verdicts and content-address results a worker keeps in memory. A job's closure is a few
 * hundred to a few thousand paths, so this holds every path of some tens of scopes; past it, the
 * least recently used go, and a path whose verdict went is checked again (a signature check, a
 * hash, or a narinfo lookup). Full, with the built paths below: about 90 MB (measured, three-key scopes).
 */
const TRUST_MEMO_ENTRIES = 50_000;
/**
 * Built paths kept in memory (the ledger's entries). Past it the least recently used go, from the
 * ledger too at its next rewrite: such a path is looked up in the job's caches, else let go of and
 * built again.
 */
const BUILT_ENTRIES = 100_000;
/** Parsed public keys kept: one per cache key a job named, a few per organization. */
const PARSED_KEYS = 10_000;
/**
 * The ledger is written anew (keeping the paths still valid, as held in memory) at start and once it
 * has grown by this many lines and by as many as the last rewrite kept: a rewrite's cost (a validity
 * query of every path in it) is spread over at least as many appends.
 */
export const LEDGER_COMPACT_LINES = 10_000;
/** Paths per Nix call (`--check-validity`, `path-info`), far below the kernel's argument limit. */
const PATHS_PER_CALL = 500;
/** How long one validity query of the ledger's rewrite may take: a Nix that hangs fails the rewrite, not the builds. */
const LEDGER_QUERY_TIMEOUT_MS = 120_000;

const entry = (path: string, narHash: string) => `${path} ${narHash}`;

interface ParsedKey { text: string; key: VerifyingKey }

export class StoreTrust {
  /** built here: path and NAR hash → the keys its inputs rested on (the ledger, in memory) */
  private readonly built = new BoundedMap<string, string[]>(BUILT_ENTRIES);
  /** path and NAR hash → its content address checked out (whoever asks) */
  private readonly contentAddressed = new BoundedMap<string, true>(TRUST_MEMO_ENTRIES);
  /** path, NAR hash and the job's keys → the keys its acceptance rests on */
  private readonly verdicts = new BoundedMap<string, string[]>(TRUST_MEMO_ENTRIES);
  private readonly parsedKeys = new BoundedMap<string, VerifyingKey | null>(PARSED_KEYS);
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
   * `ledgerFile`: where the built paths' keys are kept across restarts (one JSON line each); null:
   * in memory only. `operatorKeys`: the worker's Nix trusted-public-keys.
   * `ownKeys`: the public keys of the worker's Nix `secret-key-files`, whose signatures vouch for
   * nothing (Nix signs every path it builds with them, from whatever inputs); 'unknown': a key file
   * the worker cannot read, so no signature in the store is taken. `run`: how the ledger's rewrite
   * asks Nix which of its paths are still valid, each call given `ledgerQueryTimeoutMs`.
   */
  constructor(
    private readonly ledgerFile: string | null, private readonly operatorKeys: readonly string[], private readonly ownKeys: readonly string[] | 'unknown' = [],
    private readonly run: RunOptions = { env: process.env }, private readonly ledgerQueryTimeoutMs = LEDGER_QUERY_TIMEOUT_MS,
  ) {}

  /** Reads the ledger of what this store built, and starts writing it anew; a missing or damaged line only makes those paths unknown. */
  static async open(ledgerFile: string | null, run: RunOptions, ledgerQueryTimeoutMs = LEDGER_QUERY_TIMEOUT_MS): Promise<StoreTrust> {
    const shown = await nix(['show-config', '--json'], run);
    const setting = z.object({ value: z.array(z.string()) });
    const config = shown.exitCode === 0 ? z.object({ 'trusted-public-keys': setting, 'secret-key-files': setting.optional() }).safeParse(JSON.parse(shown.stdout)) : null;
    const trust = new StoreTrust(
      ledgerFile, config?.success ? config.data['trusted-public-keys'].value : [], config?.success ? await ownPublicKeys(config.data['secret-key-files']?.value ?? []) : 'unknown', run, ledgerQueryTimeoutMs,
    );
    if (ledgerFile === null) return trust;
    const text = await readFile(ledgerFile, 'utf8').catch(() => '');
    trust.ledgerCut = text !== '' && !text.endsWith('\n');
    const storeDir = run.env['NIX_STORE_DIR'] ?? DEFAULT_STORE_DIR;
    for (const line of text.split('\n')) {
      if (!line) continue;
      trust.ledgerLines++;
      try {
        const parsed = LedgerLine.safeParse(JSON.parse(line));
        // a path that is not one of this store's (a hand-edited line, another store directory) is dropped: Nix would refuse the rewrite's query of it
        if (parsed.success && parseStorePath(parsed.data.path, storeDir).ok) trust.built.set(entry(parsed.data.path, parsed.data.narHash), parsed.data.keys);
      } catch {
        // a line cut short by a crash: that path is unknown, so looked up or built again
      }
    }
    // not awaited: the first job does not wait for a validity query of every path in the ledger
    if (trust.ledgerLines > 0) trust.compactInBackground();
    return trust;
  }

  /**
   * Checks the closure of `paths` (all valid) for a job. Paths that are not acceptable are
   * returned in `rejected`; Nix failing to describe the closure throws.
   */
  async check(paths: readonly string[], scope: TrustScope, run: RunOptions): Promise<Verdict> {
    if (paths.length === 0) return { keys: [], rejected: [], lookedUp: 0 };
    const infos = await this.closureInfos(paths, run);
    const jobKeys = [...new Set([...this.operatorKeys, ...scope.substituters.flatMap((s) => s.publicKeys)])].sort();
    // verdicts are keyed by a digest of the keys, not the keys (up to a few KB a scope)
    const scopeId = createHash('sha256').update(jobKeys.join(' ')).digest('base64url').slice(0, 22);
    // the worker's own keys sign whatever it built: the ledger, not a signature, says what that rested on
    const trusted = this.ownKeys === 'unknown' ? [] : this.parsed(jobKeys.filter((k) => !this.ownKeys.includes(k)));
    const rests = new Set<string>();
    const open: LocalInfo[] = [];
    for (const info of infos) {
      const cached = this.verdicts.get(`${entry(info.path, info.narHash)} ${scopeId}`);
      const keys = cached ?? (await this.locally(info, jobKeys, trusted, run));
      if (keys === undefined) open.push(info);
      else this.accept(info, scopeId, keys, rests);
    }
    const rejected: string[] = [];
    let next = 0;
    const lanes = Array.from({ length: Math.min(NARINFO_LOOKUPS_AT_ONCE, open.length) }, async () => {
      while (next < open.length) {
        const info = open[next++]!;
        const keys = await this.heldBy(info, scope);
        if (keys === undefined) rejected.push(info.path);
        else this.accept(info, scopeId, keys, rests);
      }
    });
    await Promise.all(lanes);
    return { keys: [...rests].sort(), rejected: rejected.sort(), lookedUp: open.length };
  }

  /** Records outputs built here from inputs whose acceptance rested on `keys`. */
  async recordBuilt(outputs: readonly { path: string; narHash: string }[], keys: readonly string[]): Promise<void> {
    const lines: string[] = [];
    for (const output of outputs) {
      const narHash = toNix32Hash(output.narHash, 'sha256') ?? output.narHash;
      this.built.set(entry(output.path, narHash), [...keys]);
      lines.push(JSON.stringify({ path: output.path, narHash, keys }));
    }
    const file = this.ledgerFile;
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
    const file = this.ledgerFile;
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
      const timeout = AbortSignal.timeout(this.ledgerQueryTimeoutMs);
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

  private accept(info: LocalInfo, scopeId: string, keys: readonly string[], rests: Set<string>): void {
    this.verdicts.set(`${entry(info.path, info.narHash)} ${scopeId}`, [...keys]);
    for (const key of keys) rests.add(key);
  }

  /** These keys parsed, each with its text; one that does not parse is left out. */
  private parsed(texts: readonly string[]): ParsedKey[] {
    return texts.flatMap((text) => {
      let key = this.parsedKeys.get(text);
      if (key === undefined) {
        const parsed = VerifyingKey.parse(text);
        key = parsed.ok ? parsed.value : null;
        this.parsedKeys.set(text, key);
      }
      return key === null ? [] : [{ text, key }];
    });
  }

  /**
   * `nix path-info --recursive` with signatures; hashes as narinfos write them. A .drv argument
   * stands for itself (`--derivation`, asked alone: without it Nix reads it as the derivation's
   * outputs, with it an output as its deriver), so a derivation's closure is checked as any path's.
   */
  private async closureInfos(paths: readonly string[], run: RunOptions): Promise<LocalInfo[]> {
    const drvs = paths.filter((p) => p.endsWith('.drv'));
    const others = paths.filter((p) => !p.endsWith('.drv'));
    const infos = new Map<string, LocalInfo>();
    for (const [kind, flags] of [[drvs, ['--derivation']], [others, []]] as const) {
      if (kind.length === 0) continue;
      for (let i = 0; i < kind.length; i += PATHS_PER_CALL) {
        const shown = await nix(['path-info', '--json', '--sigs', '--recursive', ...flags, ...kind.slice(i, i + PATHS_PER_CALL)], run);
        if (shown.exitCode !== 0) throw new Error(`nix path-info failed: ${nixErrorText(shown.stderr)}`);
        for (const info of LocalInfo.parse(JSON.parse(shown.stdout))) infos.set(info.path, info);
      }
    }
    return [...infos.values()].map((info) => {
      const narHash = toNix32Hash(info.narHash, 'sha256');
      if (narHash === undefined) throw new Error(`nix path-info gave ${info.path} an unreadable narHash ${info.narHash}`);
      return { ...info, narHash };
    });
  }

  /** The keys a path's acceptance rests on, from the store alone; undefined: ask the job's caches. */
  private async locally(info: LocalInfo, jobKeys: readonly string[], trusted: readonly ParsedKey[], run: RunOptions): Promise<string[] | undefined> {
    if (info.ca !== undefined && (await this.checkContentAddress(info, run))) return [];
    const fingerprint = narinfoFingerprint(signedFields(info));
    for (const sig of info.signatures ?? []) {
      const key = trusted.find((k) => k.key.verify(fingerprint, sig));
      if (key) return [key.text];
    }
    if (info.ultimate === true) {
      const keys = this.built.get(entry(info.path, info.narHash));
      if (keys !== undefined && keys.every((k) => jobKeys.includes(k))) return keys;
    }
    return undefined;
  }

  /** Whether the path is the one its content address makes and its contents hash as it says. */
  private async checkContentAddress(info: LocalInfo, run: RunOptions): Promise<boolean> {
    const id = entry(info.path, info.narHash);
    if (this.contentAddressed.get(id)) return true;
    const slash = info.path.lastIndexOf('/');
    const name = info.path.slice(slash + 1 + 33);
    const references = info.references.filter((r) => r !== info.path);
    const claim = contentAddressClaim(info.ca!, name, references, references.length !== info.references.length, info.path.slice(0, slash));
    if (claim === undefined || claim.path !== info.path) return false;
    let matches: boolean;
    if (claim.of === 'nar' && claim.hash.algorithm === 'sha256') {
      // Nix hashed the NAR itself when it took the path in: its narHash is the content's.
      matches = formatHash(claim.hash) === info.narHash;
    } else {
      const digest = claim.of === 'file' ? await fileDigest(info.path, claim.hash.algorithm) : undefined;
      if (digest !== undefined) {
        matches = digest !== null && formatHash({ algorithm: claim.hash.algorithm, digest }) === formatHash(claim.hash);
      } else {
        const hashed = await nix(['hash', claim.of === 'nar' ? 'path' : 'file', '--type', claim.hash.algorithm, '--base32', info.path], run);
        const parsed = hashed.exitCode === 0 ? parseHash(hashed.stdout.trim(), claim.hash.algorithm) : undefined;
        matches = parsed?.ok === true && formatHash(parsed.value) === formatHash(claim.hash);
      }
    }
    if (matches) this.contentAddressed.set(id, true);
    return matches;
  }

  /** The key under which one of the job's caches signed this very path (same NAR hash, size, references). */
  private async heldBy(info: LocalInfo, scope: TrustScope): Promise<string[] | undefined> {
    const fingerprint = narinfoFingerprint(signedFields(info));
    for (const substituter of scope.substituters) {
      const keys = this.parsed(substituter.publicKeys);
      if (keys.length === 0) continue;
      const text = await fetchNarinfo(substituter, storePathHashPart(info.path), scope.signal).catch(() => null);
      if (text === null) continue;
      const narinfo = parseNarinfo(text);
      if (!narinfo.ok || narinfo.value.storePath !== info.path) continue;
      for (const sig of narinfo.value.sigs) {
        const key = keys.find((k) => k.key.verify(fingerprint, sig));
        if (key) return [key.text];
      }
    }
    return undefined;
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

/** The public keys of these Nix secret key files; 'unknown' when one cannot be read. */
async function ownPublicKeys(files: readonly string[]): Promise<string[] | 'unknown'> {
  const keys: string[] = [];
  for (const file of files) {
    const text = await readFile(file, 'utf8').catch(() => null);
    const key = text === null ? null : SigningKey.parse(text.trim());
    if (!key?.ok) return 'unknown';
    keys.push(key.value.publicKey.toString());
  }
  return keys;
}

/**
 * The digest of a one-file path's contents, hashed here rather than by a `nix hash file` process (a
 * job's derivations, text-addressed, are hundreds of small files); null: not a regular file, so not
 * what a flat or text address names; undefined: an algorithm left to Nix.
 */
async function fileDigest(path: string, algorithm: string): Promise<Uint8Array | null | undefined> {
  if (!['md5', 'sha1', 'sha256', 'sha512'].includes(algorithm)) return undefined;
  const stat = await lstat(path).catch(() => null);
  if (!stat?.isFile()) return null;
  const hash = createHash(algorithm);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest();
}

const signedFields = (info: LocalInfo) => ({
  storePath: info.path, narHash: info.narHash, narSize: info.narSize, references: info.references.map((r) => r.slice(r.lastIndexOf('/') + 1)),
});

/** A narinfo of one of the job's caches: a file:// cache read from disk, an HTTP one with its read password. */
async function fetchNarinfo(substituter: Substituter, hashPart: string, signal?: AbortSignal): Promise<string | null> {
  const url = new URL(substituter.url);
  if (url.protocol === 'file:') return readFile(join(fileURLToPath(url), `${hashPart}.narinfo`), 'utf8');
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  const headers: Record<string, string> = substituter.password === undefined ? {} : { authorization: `Basic ${Buffer.from(`kiln:${substituter.password}`).toString('base64')}` };
  const timeout = AbortSignal.timeout(30_000);
  const response = await fetch(`${substituter.url.replace(/\/$/, '')}/${hashPart}.narinfo`, { headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  return response.ok ? response.text() : null;
}

/**
 * Deletes these paths and everything valid that refers to them, so that Nix substitutes or builds
 * them afresh for the job; the error text when Nix refuses (a path in use by a running build, under
 * a GC root), null once they are gone.
 */
export async function letGo(paths: readonly string[], run: RunOptions): Promise<string | null> {
  const referrers = await nixStore(['--query', '--referrers-closure', ...paths], run);
  if (referrers.exitCode !== 0) return nixErrorText(referrers.stderr);
  const all = referrers.stdout.split('\n').filter((line) => line !== '');
  const deleted = await nixStore(['--delete', ...all], run);
  return deleted.exitCode === 0 ? null : nixErrorText(deleted.stderr);
}
