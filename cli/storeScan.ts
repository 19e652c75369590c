// The store scan of `kiln watch-store` (docs/cli.md, "Pushing what Nix builds"): which valid
// paths the local Nix store registered since the last look. Nix's database (ValidPaths, an
// AUTOINCREMENT id given in commit order, writers serialised) is read read-only with Node's
// built-in SQLite, so one indexed query per poll costs well under a millisecond however large the
// store (docs/cli.md has the measurement). The position is the last id seen, kept in
// `<queue>.scan` and replaced atomically (write aside, then rename) after the new paths are in the
// queue, so a watcher killed between the two queues a path twice at most, never loses one; the
// duplicate is then found present in the cache, not uploaded again.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';

/** Nix's database: $NIX_STATE_DIR/db/db.sqlite (default /nix/var/nix/db/db.sqlite). */
export function nixDatabaseFile(): string {
  return join(process.env['NIX_STATE_DIR'] || '/nix/var/nix', 'db', 'db.sqlite');
}

/** node:sqlite warns that it is experimental when first loaded; that line is noise for a CLI user. */
async function loadSqlite(): Promise<typeof import('node:sqlite')> {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    if (/SQLite is an experimental feature/.test(text)) return;
    (emitWarning as (w: string | Error, ...r: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return await import('node:sqlite');
  } finally {
    process.emitWarning = emitWarning;
  }
}

export class StoreScan {
  private constructor(private readonly db: DatabaseSync, readonly stateFile: string, private position: number) {}

  /**
   * Opens Nix's database read-only and the scan position: the recorded one, or the store's newest
   * path on a first start (what is already there is not pushed). A recorded position beyond the
   * newest id means the database was replaced; the scan then starts at its newest path.
   */
  static async open(stateFile: string, databaseFile = nixDatabaseFile()): Promise<StoreScan> {
    const { DatabaseSync } = await loadSqlite();
    let db: DatabaseSync;
    try {
      db = new DatabaseSync(databaseFile, { readOnly: true });
      db.prepare('select 1 from ValidPaths limit 1').all();
    } catch (e) {
      throw new Error(`cannot read Nix's database ${databaseFile} (${e instanceof Error ? e.message : String(e)}): run watch-store as a user that can read it, or with --no-scan to push only what the post-build-hook queues`, { cause: e });
    }
    const newest = Number((db.prepare('select coalesce(max(id), 0) as newest from ValidPaths').get() as { newest: number | bigint }).newest);
    const recorded = await readFile(stateFile, 'utf8').then((text) => Number(text.trim()), () => NaN);
    const known = Number.isSafeInteger(recorded) && recorded >= 0 && recorded <= newest;
    const scan = new StoreScan(db, stateFile, known ? recorded : newest);
    if (!known) await scan.record(newest);
    return scan;
  }

  /** Paths registered after the position, oldest first (derivations left out: substituters serve outputs). */
  newPaths(): { paths: string[]; through: number } {
    const rows = this.db.prepare('select id, path from ValidPaths where id > ? order by id').all(this.position) as { id: number | bigint; path: string }[];
    const through = rows.length > 0 ? Number(rows[rows.length - 1]!.id) : this.position;
    return { paths: rows.map((r) => r.path).filter((p) => !p.endsWith('.drv')), through };
  }

  /** The paths up to `through` are in the queue: the position moves there (written aside, then renamed). */
  async record(through: number): Promise<void> {
    const temporary = `${this.stateFile}.${process.pid}`;
    await writeFile(temporary, `${through}\n`, { mode: 0o600 });
    await rename(temporary, this.stateFile);
    this.position = through;
  }

  close(): void {
    this.db.close();
  }
}
