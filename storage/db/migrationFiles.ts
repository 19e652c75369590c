// The migration set on disk: forward-only SQL files named 0001_name.sql, applied in number order.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

export interface MigrationFile {
  /** the file name, e.g. 0001_foundation.sql; it is also the key in schema_migrations */
  name: string;
  number: number;
  /** SHA-256 (hex) of the text with line endings normalised, so a CRLF checkout is not "changed" */
  checksum: string;
  text: string;
}

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

const fileName = /^(\d{4})_[a-z0-9_]+\.sql$/;

/** Reads and checks the migration files of a directory, sorted by number. */
export async function readMigrations(directory: string = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  let entries: string[];
  try {
    entries = await readdir(directory);
  } catch (cause) {
    throw new Error(`cannot read the migrations directory ${directory}`, { cause });
  }
  const files: MigrationFile[] = [];
  for (const name of entries.filter((e) => e.endsWith('.sql')).sort()) {
    const match = fileName.exec(name);
    if (!match) throw new Error(`migration file ${name} in ${directory} is misnamed: expected NNNN_lowercase_name.sql, e.g. 0002_accounts.sql`);
    const text = (await readFile(join(directory, name), 'utf8')).replaceAll('\r\n', '\n');
    const number = Number(match[1]);
    const clash = files.find((f) => f.number === number);
    if (clash) throw new Error(`migrations ${clash.name} and ${name} in ${directory} share the number ${match[1]}; give the newer one the next free number`);
    files.push({ name, number, checksum: sha256(text), text });
  }
  return files;
}

/** One checksum for a whole set: a database migrated with one set is interchangeable with another of the same set. */
export function migrationSetChecksum(files: readonly MigrationFile[]): string {
  return sha256(files.map((f) => `${f.name}:${f.checksum}\n`).join(''));
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
