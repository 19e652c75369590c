import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes `contents` (JSON-encoded unless already text) to `dir/name` and returns the path. */
export function fixtureFile(dir: string, contents: unknown, name = 'kiln.json'): string {
  const file = join(dir, name);
  writeFileSync(file, typeof contents === 'string' ? contents : JSON.stringify(contents));
  return file;
}
