// The flake source `kiln build` uploads: a gzipped tar of one directory, every entry under a single
// top-level `source/` (Nix unpacks such a tarball to that directory). In a git work tree it holds
// the tracked files and the untracked ones git does not ignore, as they are on disk (uncommitted
// changes included), like `nix build` of a dirty tree; elsewhere every file below the directory
// but `.git` and `result*` links. Owners, times and order are fixed, so the same tree gives the
// same bytes. tar writes the archive to a private temporary file, which the upload streams from:
// a tree of any size never sits in the CLI's memory.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { lstat, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pipeline } from 'node:stream/promises';

function capture(command: string, args: string[], cwd: string, input?: Buffer): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => reject(new Error(`cannot run ${command}: ${e.message}`, { cause: e })));
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(chunks), stderr }));
    child.stdin.end(input);
  });
}

/** The files git would see in `dir`, relative to it; null when `dir` is not in a git work tree. */
async function gitFiles(dir: string): Promise<string[] | null> {
  const listed = await capture('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], dir).catch(() => null);
  if (listed === null || listed.code !== 0) return null;
  const names = listed.stdout.toString('utf8').split('\0').filter((n) => n !== '');
  // a tracked file deleted in the work tree is left out, as the tree is now
  const present: string[] = [];
  for (const name of names) if (await lstat(join(dir, name)).then(() => true, () => false)) present.push(name);
  return present;
}

/** Every file and link below `dir` but .git and the `result*` links nix build leaves. */
async function directoryFiles(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (at: string) => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.name === '.git' || (entry.isSymbolicLink() && /^result(-.*)?$/.test(entry.name) && at === dir)) continue;
      if (entry.isDirectory()) await walk(path);
      else found.push(relative(dir, path));
    }
  };
  await walk(dir);
  return found;
}

export interface SourceArchive {
  /** the gzipped tarball, in a directory of its own that `remove` deletes */
  file: string;
  size: number;
  files: number;
  /** where the file list came from */
  from: 'git' | 'directory';
  remove(): Promise<void>;
}

/** tar of `files` (relative to `dir`) written into `file`; stderr for the failure's words. */
function tarInto(dir: string, files: string[], file: string): Promise<void> {
  // S: symbolic link targets keep their text; member names and hard link targets move below source/
  const child = spawn('tar', [
    '--create', '--gzip', '--file=-', '--sort=name', '--mtime=@1', '--owner=0', '--group=0', '--numeric-owner',
    '--transform=s,^,source/,S', '--no-recursion', '--null', '--files-from=-',
  ], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`cannot run tar: ${e.message}`, { cause: e })));
    child.on('close', resolve);
  });
  child.stdin.end(Buffer.from(files.map((f) => `${f}\0`).join('')));
  return Promise.all([pipeline(child.stdout, createWriteStream(file, { mode: 0o600 })), exited]).then(([, code]) => {
    if (code !== 0) throw new Error(`tar failed: ${stderr.trim().slice(-2000)}`);
  });
}

export async function sourceArchive(dir: string): Promise<SourceArchive> {
  const fromGit = await gitFiles(dir);
  const files = (fromGit ?? (await directoryFiles(dir))).sort();
  if (!files.includes('flake.nix')) throw new Error(`${dir} has no flake.nix${fromGit ? ' that git tracks or sees (git add it)' : ''}`);
  const into = await mkdtemp(join(tmpdir(), 'kiln-build-'));
  const remove = () => rm(into, { recursive: true, force: true });
  const file = join(into, 'source.tar.gz');
  try {
    await tarInto(dir, files, file);
    return { file, size: (await stat(file)).size, files: files.length, from: fromGit ? 'git' : 'directory', remove };
  } catch (e) {
    await remove();
    throw e;
  }
}
