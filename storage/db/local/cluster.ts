// The embedded cluster's files under <baseDir>/postgres. The directory belongs to the server user
// (mode 0700) so PostgreSQL can write there; kiln, as root or as that same user, can too.
import { randomBytes } from 'node:crypto';
import { appendFile, chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { PostgresBinaries } from './binaries.js';
import { chownToServerUser, run, type ServerUser } from './serverUser.js';

export interface ClusterPaths {
  root: string;
  /** PGDATA */
  data: string;
  /** initdb writes here first; renamed to `data` only when complete, so `data` never holds half a cluster */
  dataInProgress: string;
  /** the superuser's password (0600): the server listens on 127.0.0.1, where other local users can connect */
  password: string;
  /** the server's stderr for this run; the previous run's is kept as server.log.1 */
  log: string;
  /** the pid of the kiln process that started the running server */
  owner: string;
}

/** kiln's settings file inside PGDATA, included from postgresql.conf and rewritten at every start. */
const SETTINGS_FILE = 'kiln.conf';
export const SUPERUSER = 'kiln';

export function clusterPaths(baseDir: string): ClusterPaths {
  const root = join(baseDir, 'postgres');
  return {
    root,
    data: join(root, 'data'),
    dataInProgress: join(root, 'data.initdb'),
    password: join(root, 'password'),
    log: join(root, 'server.log'),
    owner: join(root, 'kiln.pid'),
  };
}

export async function prepareClusterRoot(paths: ClusterPaths, user: ServerUser): Promise<void> {
  await mkdir(paths.root, { recursive: true, mode: 0o700 });
  await chownToServerUser(user, paths.root);
  await chmod(paths.root, 0o700);
}

export const isInitialised = (paths: ClusterPaths): Promise<boolean> => exists(join(paths.data, 'PG_VERSION'));

/** Creates the cluster with a fresh random superuser password. */
export async function initialiseCluster(paths: ClusterPaths, bins: PostgresBinaries, user: ServerUser, log: Logger): Promise<void> {
  if (await exists(paths.data)) {
    throw new Error(`localDb: ${paths.data} exists but holds no PostgreSQL cluster (no PG_VERSION); move it away and start again`);
  }
  await rm(paths.dataInProgress, { recursive: true, force: true });
  const password = randomBytes(24).toString('hex');
  await writePrivateFile(paths.password, `${password}\n`, user);
  const started = performance.now();
  await run(
    bins.initdb,
    [
      `--pgdata=${paths.dataInProgress}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${paths.password}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      // The builtin provider: UTF-8 aware, and no dependence on the host's locales or their upgrades.
      '--locale=C',
      '--locale-provider=builtin',
      '--builtin-locale=C.UTF-8',
    ],
    user,
  );
  await appendFile(join(paths.dataInProgress, 'postgresql.conf'), `\n# kiln writes its settings (localDb.*) here at every start\ninclude_if_exists = '${SETTINGS_FILE}'\n`);
  await rename(paths.dataInProgress, paths.data);
  log.info({ dataDir: paths.data, ms: Math.round(performance.now() - started) }, 'created the embedded PostgreSQL cluster');
}

export async function readPassword(paths: ClusterPaths): Promise<string> {
  try {
    return (await readFile(paths.password, 'utf8')).trim();
  } catch (cause) {
    throw new Error(`localDb: the cluster in ${paths.data} exists but its password file ${paths.password} cannot be read; restore it, or move the data directory away to start afresh`, { cause });
  }
}

/** Writes the server settings file; later lines win, so the connection settings come last. */
export async function writeServerSettings(paths: ClusterPaths, settings: Readonly<Record<string, string>>, port: number, user: ServerUser): Promise<void> {
  const all: Record<string, string> = {
    ...settings,
    listen_addresses: '127.0.0.1',
    port: String(port),
    // No Unix socket: the default directory (/tmp or /run/postgresql) may belong to another server.
    unix_socket_directories: '',
  };
  const lines = Object.entries(all).map(([name, value]) => `${settingName(name)} = ${quoteSetting(name, value)}`);
  const file = join(paths.data, SETTINGS_FILE);
  await writeFile(file, `# Written by kiln at every start from localDb.*; edit kiln's configuration, not this file.\n${lines.join('\n')}\n`);
  await chownToServerUser(user, file);
}

function settingName(name: string): string {
  if (!/^[a-z][a-z0-9_.]*$/.test(name)) throw new Error(`localDb: "${name}" is not a PostgreSQL setting name`);
  return name;
}

function quoteSetting(name: string, value: string): string {
  if (/[\n\r\0]/.test(value)) throw new Error(`localDb: the value of ${name} contains a line break`);
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

/** Keeps the previous run's log as server.log.1 and starts an empty one the server user may append to. */
export async function rotateServerLog(paths: ClusterPaths, user: ServerUser): Promise<void> {
  if (await exists(paths.log)) await rename(paths.log, `${paths.log}.1`);
  await writePrivateFile(paths.log, '', user);
}

export async function readServerLog(paths: ClusterPaths): Promise<string> {
  return readFile(paths.log, 'utf8').catch(() => '');
}

export async function writePrivateFile(path: string, text: string, user: ServerUser): Promise<void> {
  await writeFile(`${path}.tmp`, text, { mode: 0o600 });
  await chownToServerUser(user, `${path}.tmp`);
  await rename(`${path}.tmp`, path);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
