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
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  contentAddressClaim, formatHash, narinfoFingerprint, parseHash, parseNarinfo, SigningKey, storePathHashPart, toNix32Hash, VerifyingKey, type Substituter,
} from '../protocol/index.js';
import type { RunOptions } from './childProcess.js';
import { BoundedMap } from './boundedMap.js';
import { BuiltPathsLedger } from './builtPathsLedger.js';
import { nix, nixErrorText, nixStore, PATHS_PER_CALL } from './nixCli.js';

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
 * hash, or a narinfo lookup). Full, with the built paths (builtPathsLedger.ts): about 90 MB (measured, three-key scopes).
 */
const TRUST_MEMO_ENTRIES = 50_000;
/** Parsed public keys kept: one per cache key a job named, a few per organization. */
const PARSED_KEYS = 10_000;

const entry = (path: string, narHash: string) => `${path} ${narHash}`;

interface ParsedKey { text: string; key: VerifyingKey }

export class StoreTrust {
  /** path and NAR hash → its content address checked out (whoever asks) */
  private readonly contentAddressed = new BoundedMap<string, true>(TRUST_MEMO_ENTRIES);
  /** path, NAR hash and the job's keys → the keys its acceptance rests on */
  private readonly verdicts = new BoundedMap<string, string[]>(TRUST_MEMO_ENTRIES);
  private readonly parsedKeys = new BoundedMap<string, VerifyingKey | null>(PARSED_KEYS);

  /** what this store built and what that rested on */
  private readonly ledger: BuiltPathsLedger;

  /**
   * `ledgerFile`: where the built paths' keys are kept across restarts (one JSON line each); null:
   * in memory only. `operatorKeys`: the worker's Nix trusted-public-keys.
   * `ownKeys`: the public keys of the worker's Nix `secret-key-files`, whose signatures vouch for
   * nothing (Nix signs every path it builds with them, from whatever inputs); 'unknown': a key file
   * the worker cannot read, so no signature in the store is taken. `run`: how the ledger's rewrite
   * asks Nix which of its paths are still valid, each call given `ledgerQueryTimeoutMs`.
   */
  constructor(
    ledgerFile: string | null, private readonly operatorKeys: readonly string[], private readonly ownKeys: readonly string[] | 'unknown' = [],
    run: RunOptions = { env: process.env }, ledgerQueryTimeoutMs?: number,
  ) {
    this.ledger = new BuiltPathsLedger(ledgerFile, run, ledgerQueryTimeoutMs);
  }

  /** Reads the ledger of what this store built, and starts writing it anew; a missing or damaged line only makes those paths unknown. */
  static async open(ledgerFile: string | null, run: RunOptions, ledgerQueryTimeoutMs?: number): Promise<StoreTrust> {
    const shown = await nix(['show-config', '--json'], run);
    const setting = z.object({ value: z.array(z.string()) });
    const config = shown.exitCode === 0 ? z.object({ 'trusted-public-keys': setting, 'secret-key-files': setting.optional() }).safeParse(JSON.parse(shown.stdout)) : null;
    const trust = new StoreTrust(
      ledgerFile, config?.success ? config.data['trusted-public-keys'].value : [], config?.success ? await ownPublicKeys(config.data['secret-key-files']?.value ?? []) : 'unknown', run, ledgerQueryTimeoutMs,
    );
    await trust.ledger.load();
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
  /** Records outputs built here from inputs whose acceptance rested on `keys`. */
  recordBuilt(outputs: readonly { path: string; narHash: string }[], keys: readonly string[]): Promise<void> {
    return this.ledger.record(outputs, keys);
  }

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
      const keys = this.ledger.keysOf(info.path, info.narHash);
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
 * a GC root), null once they are gone. PATHS_PER_CALL paths a Nix call: a job may reject tens of
 * thousands, past the kernel's argument limit. `nix-store --query --referrers-closure` prints its
 * closure with references before their referrers; deleting in the reverse order, batch after batch,
 * deletes every path after (or with) its referrers, which a referrers closure holds. A path already
 * in an earlier batch's closure is not deleted twice.
 */
export async function letGo(paths: readonly string[], run: RunOptions): Promise<string | null> {
  const order: string[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < paths.length; i += PATHS_PER_CALL) {
    const referrers = await nixStore(['--query', '--referrers-closure', ...paths.slice(i, i + PATHS_PER_CALL)], run);
    if (referrers.exitCode !== 0) return nixErrorText(referrers.stderr);
    const closure = referrers.stdout.split('\n').filter((line) => line !== '' && !seen.has(line));
    for (const path of closure.reverse()) {
      seen.add(path);
      order.push(path);
    }
  }
  for (let i = 0; i < order.length; i += PATHS_PER_CALL) {
    const deleted = await nixStore(['--delete', ...order.slice(i, i + PATHS_PER_CALL)], run);
    if (deleted.exitCode !== 0) return nixErrorText(deleted.stderr);
  }
  return null;
}
