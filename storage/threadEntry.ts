// A worker thread's entry compiled ahead to one JavaScript file (docs/http.md, "Memory at rest:
// serving threads without tsx"). Run through tsx, every worker isolate carries tsx's loader, its
// lexers and each module's source map and transformed text: ~5-10 MiB of RSS per serving thread.
// The bundle is built with esbuild (tsx's own dependency, so any install has it) at the first start
// after a change, kept in node_modules/.cache/kiln/ under the hash of its inputs' contents, and
// found again by hashing the inputs the last build listed: nothing to run after a checkout, and
// never a stale bundle. When it cannot be built (no esbuild, a read-only install, a build error)
// the thread runs its TypeScript through tsx as before.
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface ThreadEntry {
  /** what the Worker is started from */
  url: URL;
  /** whether that is still the TypeScript entry, run through tsx's loader */
  typescript: boolean;
  /** whether this call built the bundle (false: found in the cache, or fell back) */
  built: boolean;
  /** why the TypeScript entry is used (null when the bundle is) */
  fallback: string | null;
}

export interface ThreadEntryOptions {
  /** where bundles are kept (default node_modules/.cache/kiln/threads); it must sit where the externals resolve from */
  cacheDir?: string;
  /** packages left to Node's resolution: native addons (uWebSockets.js) */
  external?: string[];
}

interface Manifest {
  /** absolute paths of every file the last build read */
  inputs: string[];
}

const DEFAULT_CACHE = fileURLToPath(new URL('../node_modules/.cache/kiln/threads/', import.meta.url));
/** esbuild's ESM output turns a bundled CommonJS module's require() of a builtin (ws's) into a throw unless `require` exists. */
const BANNER = "import { createRequire as kilnCreateRequire } from 'node:module'; const require = kilnCreateRequire(import.meta.url);";
/** Bundles of an entry older than this are removed when a new one is built (a running server may still restart a thread from its own). */
const KEEP_OLD_MS = 24 * 3600_000;

export async function compiledThreadEntry(entry: URL, { cacheDir = DEFAULT_CACHE, external = [] }: ThreadEntryOptions = {}): Promise<ThreadEntry> {
  const entryPath = fileURLToPath(entry);
  // one name per entry file, so checkouts sharing a node_modules (git worktrees) keep bundles apart
  const stem = `${basename(entryPath).replace(/\.[cm]?ts$/, '')}-${sha256(entryPath).slice(0, 12)}`;
  const manifestPath = join(cacheDir, `${stem}.json`);
  try {
    const known = await cached(manifestPath, cacheDir, stem);
    if (known !== null) return { url: pathToFileURL(known), typescript: false, built: false, fallback: null };
    return { url: pathToFileURL(await build(entryPath, manifestPath, cacheDir, stem, external)), typescript: false, built: true, fallback: null };
  } catch (error) {
    return { url: entry, typescript: true, built: false, fallback: error instanceof Error ? error.message : String(error) };
  }
}

/** The bundle the manifest's inputs hash to, if it exists; null when something changed or nothing was built. */
async function cached(manifestPath: string, cacheDir: string, stem: string): Promise<string | null> {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as Manifest;
  } catch {
    return null;
  }
  const hash = await inputsHash(manifest.inputs).catch(() => null);
  if (hash === null) return null;
  const file = join(cacheDir, `${stem}-${hash}.mjs`);
  return (await exists(file)) ? file : null;
}

async function build(entryPath: string, manifestPath: string, cacheDir: string, stem: string, external: string[]): Promise<string> {
  const esbuild = await import('esbuild');
  const workingDir = process.cwd();
  const result = await esbuild.build({
    entryPoints: [entryPath], bundle: true, platform: 'node', format: 'esm', target: 'node22', external,
    absWorkingDir: workingDir, write: false, metafile: true, sourcemap: 'external', outfile: join(cacheDir, `${stem}.mjs`), banner: { js: BANNER }, logLevel: 'silent',
  });
  // a namespaced input (`<define:…>`, `file:`-less plugin inputs) is no file to hash
  const inputs = Object.keys(result.metafile.inputs).filter((input) => !/^[a-z-]+:/.test(input)).map((input) => resolve(workingDir, input)).sort();
  const hash = await inputsHash(inputs);
  const file = join(cacheDir, `${stem}-${hash}.mjs`);
  const code = result.outputFiles.find((f) => f.path.endsWith('.mjs'));
  const map = result.outputFiles.find((f) => f.path.endsWith('.mjs.map'));
  if (code === undefined) throw new Error('esbuild wrote no bundle');
  await mkdir(cacheDir, { recursive: true });
  // Node reads the map only under --enable-source-maps: stack traces then name the TypeScript lines.
  if (map !== undefined) await writeAtomically(`${file}.map`, map.contents);
  await writeAtomically(file, `${code.text}//# sourceMappingURL=${basename(file)}.map\n`);
  await writeAtomically(manifestPath, JSON.stringify({ inputs } satisfies Manifest));
  await removeOld(cacheDir, stem, basename(file));
  return file;
}

/** The contents of every input, in order, named by path: any edit, added import or moved file changes it. */
async function inputsHash(inputs: string[]): Promise<string> {
  const hash = createHash('sha256');
  for (const input of inputs) hash.update(`${input}\0`).update(await readFile(input)).update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Concurrent starts may build the same bundle: each writes its own file and renames it into place. */
async function writeAtomically(path: string, contents: string | Uint8Array): Promise<void> {
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(temporary, contents);
  await rename(temporary, path);
}

async function removeOld(cacheDir: string, stem: string, current: string): Promise<void> {
  const now = Date.now();
  for (const name of await readdir(cacheDir)) {
    if (!name.startsWith(`${stem}-`) || name === current || name === `${current}.map`) continue;
    const path = join(cacheDir, name);
    const info = await stat(path).catch(() => null);
    if (info !== null && now - info.mtimeMs > KEEP_OLD_MS) await unlink(path).catch(() => undefined);
  }
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null)) !== null;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
