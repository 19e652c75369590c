// The bound on a worker's own store (worker.storeRootMaxMb; docs/worker.md, "A store of its own"):
// a build server's worker only receives substitutes and the server's outputs there, and once they
// are pushed the caches hold them, so nothing in it is needed after its job. After a build ends, if
// the store's files pass the bound, the worker collects it (`nix-store --gc` on that store). A
// collection never runs beside a build of this worker: between fetching a job's .drv and pinning its
// inputs no root holds them, so new builds wait for the collection and the collection waits for
// the builds under way. What kept builds keep (their GC roots) survives anyway.
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../config/index.js';
import { nixStore } from './nixCli.js';
import type { WorkerSettings } from './settings.js';

/** Bytes of the files under `<root>/nix/store` (symlinks as themselves); 0 before the store exists. */
export async function storeBytes(root: string): Promise<number> {
  let total = 0;
  const walk = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return; // gone meanwhile, or no store yet
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else total += await lstat(path).then((s) => s.size, () => 0);
    }
  };
  await walk(join(root, 'nix', 'store'));
  return total;
}

interface CollectorOptions {
  /** the store's root (worker.storeRoot) */
  root: string;
  /** worker.storeRootMaxMb in bytes: collected when past it after a build (0: after every build) */
  maxBytes: number;
  /** the environment naming the store (ownStoreEnv) */
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** how the store is measured */
  measure?: (root: string) => Promise<number>;
  /** told just before each `nix-store --gc` starts (tests look at what runs beside it) */
  collecting?: () => void;
}

export class OwnStoreCollector {
  private active = 0;
  private idle: (() => void)[] = [];
  /** a collection wanted or under way: new builds wait for it */
  private collecting: Promise<void> | null = null;
  private measuring = false;
  /** the last post-build check (measured, and a collection wanted when past the bound) */
  private check: Promise<void> = Promise.resolve();
  /** collections run so far (tests and logs) */
  collections = 0;

  constructor(private readonly options: CollectorOptions) {}

  /** Runs one build's work on the store: after a collection under way, never beside one. */
  async hold<T>(work: () => Promise<T>): Promise<T> {
    while (this.collecting) await this.collecting;
    this.active++;
    try {
      return await work();
    } finally {
      this.active--;
      if (this.active === 0) for (const wake of this.idle.splice(0)) wake();
      this.check = this.afterBuild().catch((e: unknown) => this.options.log.warn({ err: e }, 'could not measure the worker\'s own store'));
    }
  }

  /** Resolves once the store was measured after the last build that ended (a wanted collection may still wait for builds). */
  get checked(): Promise<void> {
    return this.check;
  }

  /** Resolves once the last build's check and any collection it wanted are over (the worker's stop, tests). */
  async settle(): Promise<void> {
    await this.check;
    while (this.collecting) await this.collecting;
  }

  /** Builds running on the store now. */
  get building(): number {
    return this.active;
  }

  /** A collection is wanted or under way: new builds wait for it. */
  get wanted(): boolean {
    return this.collecting !== null;
  }

  private async afterBuild(): Promise<void> {
    if (this.measuring || this.collecting) return;
    this.measuring = true;
    let bytes: number;
    try {
      bytes = await (this.options.measure ?? storeBytes)(this.options.root);
    } finally {
      this.measuring = false;
    }
    if (bytes <= this.options.maxBytes) return;
    if (this.collecting) return;
    this.collecting = this.collect(bytes).finally(() => {
      this.collecting = null;
    });
  }

  private async collect(bytes: number): Promise<void> {
    while (this.active > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    const { root, env, log } = this.options;
    this.options.collecting?.();
    const result = await nixStore(['--gc'], { env }).catch((e: unknown) => ({ exitCode: -1, stderr: String(e) }));
    this.collections++;
    if (result.exitCode !== 0) log.warn({ root, stderr: result.stderr.slice(-2000) }, 'collecting the worker\'s own store failed');
    else log.info({ root, bytesBefore: bytes }, 'collected the worker\'s own store (worker.storeRootMaxMb)');
  }
}

/** The collector of a worker with a store of its own; null for a worker on the configured store. */
export function ownStoreCollector(settings: Pick<WorkerSettings, 'storeRoot' | 'storeRootMaxBytes' | 'childEnv'>, log: Logger): OwnStoreCollector | null {
  if (settings.storeRoot === null) return null;
  return new OwnStoreCollector({ root: settings.storeRoot, maxBytes: settings.storeRootMaxBytes, env: settings.childEnv, log });
}
