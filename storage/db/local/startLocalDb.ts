// localDb.enable: kiln's own PostgreSQL under <baseDir>/postgres, started with kiln and stopped
// with it. initdb takes ~0.7 s the first time; a start takes ~0.2 s after that (measured).
import { createServer } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';
import postgres from 'postgres';
import type { Logger } from 'pino';
import { binaryDirectories, findPostgresBinaries, type PostgresBinaries } from './binaries.js';
import {
  clusterPaths,
  initialiseCluster,
  isInitialised,
  prepareClusterRoot,
  readPassword,
  readServerLog,
  rotateServerLog,
  SUPERUSER,
  writeServerSettings,
  type ClusterPaths,
} from './cluster.js';
import { isAlive, isPostgresProcess, readPostmasterLock } from './postmaster.js';
import { ensureSearchable, resolveServerUser, run, type ServerUser } from './serverUser.js';

export interface LocalDbOptions {
  baseDir: string;
  /** null or absent: a free port chosen at each start */
  port?: number | null;
  /** PostgreSQL settings (name → value), e.g. { shared_buffers: '512MB' } */
  settings: Readonly<Record<string, string>>;
  log: Logger;
}

export interface LocalDb {
  /** postgres://kiln:<password>@127.0.0.1:<port>/kiln — it holds the password; do not log it */
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

export const LOCAL_DATABASE = 'kiln';
const PORT_ATTEMPTS = 3;

export async function startLocalDb(opts: LocalDbOptions): Promise<LocalDb> {
  const { log } = opts;
  const started = performance.now();
  const bins = await findPostgresBinaries();
  const user = await resolveServerUser(log);
  const paths = clusterPaths(opts.baseDir);
  await prepareClusterRoot(paths, user);
  await ensureSearchable(user, [paths.root, ...binaryDirectories(bins)], log);
  await stopLeftoverServer(paths, bins, user, log);
  if (!(await isInitialised(paths))) await initialiseCluster(paths, bins, user, log);
  const password = await readPassword(paths);

  const port = await startServer(paths, bins, user, opts);
  const serverPid = (await readPostmasterLock(paths.data))?.pid;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // Only the server this call started: a later start may have taken the directory over.
    if ((await readPostmasterLock(paths.data))?.pid !== serverPid) return;
    await run(bins.pgCtl, ['stop', '-D', paths.data, '-m', 'fast', '-w', '-t', '60', '-s'], user);
    await rm(paths.owner, { force: true });
    log.info({ dataDir: paths.data }, 'embedded PostgreSQL stopped');
  };
  const url = `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/${LOCAL_DATABASE}`;
  try {
    await writeFile(paths.owner, `${process.pid}\n`);
    await ensureDatabase(password, port);
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  log.info({ dataDir: paths.data, port, ms: Math.round(performance.now() - started) }, 'embedded PostgreSQL started');
  return { url, port, dataDir: paths.data, stop };
}

/** A server still running on this data directory: stopped when the kiln that started it is gone. */
async function stopLeftoverServer(paths: ClusterPaths, bins: PostgresBinaries, user: ServerUser, log: Logger): Promise<void> {
  const lock = await readPostmasterLock(paths.data);
  if (!lock) return;
  if (!(await isPostgresProcess(lock.pid))) {
    // The pid is gone or now names another program (after a reboot): PostgreSQL would refuse to
    // start over a lock file whose pid is alive, so remove it; shared memory is checked separately.
    await rm(`${paths.data}/postmaster.pid`, { force: true });
    return;
  }
  const owner = Number((await readFile(paths.owner, 'utf8').catch(() => '')).trim());
  if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
    throw new Error(
      `localDb: the PostgreSQL server in ${paths.data} (pid ${lock.pid}) belongs to another kiln process (pid ${owner}) that is still running; ` +
        'stop that process, or give this one its own baseDir',
    );
  }
  log.warn({ postmasterPid: lock.pid, dataDir: paths.data }, 'stopping an embedded PostgreSQL server left running by a kiln that ended without stopping it');
  await run(bins.pgCtl, ['stop', '-D', paths.data, '-m', 'fast', '-w', '-t', '60', '-s'], user);
}

async function startServer(paths: ClusterPaths, bins: PostgresBinaries, user: ServerUser, opts: LocalDbOptions): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    await writeServerSettings(paths, opts.settings, port, user);
    await rotateServerLog(paths, user);
    try {
      await run(bins.pgCtl, ['start', '-D', paths.data, '-l', paths.log, '-w', '-t', '60', '-s'], user);
      return port;
    } catch (cause) {
      const serverLog = await readServerLog(paths);
      // A port picked as free can be taken before the server binds it; another pick then works.
      if (opts.port == null && /could not bind|Address already in use/.test(serverLog) && attempt < PORT_ATTEMPTS) continue;
      const portHint = opts.port == null ? '' : ` (localDb.port is ${opts.port})`;
      throw new Error(`localDb: PostgreSQL did not start${portHint}; its log ${paths.log} says:\n${lastLines(serverLog, 15)}`, { cause });
    }
  }
}

async function ensureDatabase(password: string, port: number): Promise<void> {
  const sql = postgres({ host: '127.0.0.1', port, user: SUPERUSER, pass: password, database: 'postgres', max: 1, onnotice: () => undefined });
  try {
    const [row] = await sql<{ exists: boolean }[]>`select exists (select from pg_database where datname = ${LOCAL_DATABASE}) as exists`;
    if (!row?.exists) await sql.unsafe(`create database ${LOCAL_DATABASE}`);
  } finally {
    await sql.end();
  }
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

const lastLines = (text: string, count: number): string => text.trimEnd().split('\n').slice(-count).join('\n') || '(empty)';
