// database.url is a libpq connection URL, the form every PostgreSQL tool and NixOS module writes.
// postgres.js and node-postgres each understand only part of it (postgres.js ignores `?host=` and
// sends it to the server as a setting; neither accepts `postgresql://kiln@/kiln`), so kiln parses
// the URL once here and hands both libraries explicit options.
import type { Options as PostgresJsOptions, PostgresType } from 'postgres';

export interface DatabaseTarget {
  /** a host name or address, or the directory of a Unix socket (starts with "/") */
  host: string;
  port: number;
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
  sslmode: SslMode;
  /** the other query parameters, sent to the server as startup parameters (e.g. `options`) */
  params: Record<string, string>;
}

const sslModes = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
type SslMode = (typeof sslModes)[number];
const isSslMode = (value: string): value is SslMode => (sslModes as readonly string[]).includes(value);

// libpq's compiled-in default on Debian, Ubuntu and NixOS; a URL without a host means this socket.
export const DEFAULT_SOCKET_DIR = '/run/postgresql';
const DEFAULT_PORT = 5432;

const urlShape = /^(postgres|postgresql):\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/;

/** Parses a libpq URL; throws an Error naming what is wrong (never echoing the password). */
export function parseDatabaseUrl(text: string): DatabaseTarget {
  const match = urlShape.exec(text.trim());
  if (!match) throw new Error('database.url: expected postgresql://[user[:password]@][host][:port][/database][?param=value], e.g. postgresql://kiln@/kiln?host=/run/postgresql');
  const [, , userInfo = '', hostPort = '', path = '', query = ''] = match;
  if (hostPort.includes(',')) throw new Error('database.url: several hosts are not supported; name one host');

  const colon = userInfo.indexOf(':');
  let user = decode(colon < 0 ? userInfo : userInfo.slice(0, colon), 'user') || undefined;
  let password = colon < 0 ? undefined : decode(userInfo.slice(colon + 1), 'password');
  let { host, port } = splitHostPort(hostPort);
  let database = decode(path, 'database') || undefined;
  let sslmode: SslMode = 'prefer';
  const params: Record<string, string> = {};

  for (const pair of query.split('&').filter((p) => p !== '')) {
    const eq = pair.indexOf('=');
    const key = decode(eq < 0 ? pair : pair.slice(0, eq), 'parameter name');
    const value = decode(eq < 0 ? '' : pair.slice(eq + 1), `parameter ${key}`);
    if (key === 'host') host = value;
    else if (key === 'port') port = parsePort(value);
    else if (key === 'user') user = value;
    else if (key === 'password') password = value;
    else if (key === 'dbname') database = value;
    else if (key === 'sslmode') {
      if (!isSslMode(value)) throw new Error(`database.url: sslmode "${value}" is not one of ${sslModes.join(', ')}`);
      sslmode = value;
    } else params[key] = value;
  }
  return { host: host || DEFAULT_SOCKET_DIR, port: port ?? DEFAULT_PORT, user, password, database, sslmode, params };
}

function splitHostPort(hostPort: string): { host: string; port: number | undefined } {
  const bracketed = /^\[([^\]]*)\](?::(\d*))?$/.exec(hostPort);
  if (bracketed) return { host: bracketed[1] ?? '', port: bracketed[2] ? parsePort(bracketed[2]) : undefined };
  const colon = hostPort.lastIndexOf(':');
  if (colon < 0) return { host: decode(hostPort, 'host'), port: undefined };
  const portText = hostPort.slice(colon + 1);
  return { host: decode(hostPort.slice(0, colon), 'host'), port: portText === '' ? undefined : parsePort(portText) };
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65535) throw new Error(`database.url: port "${text}" is not a port number (1-65535)`);
  return port;
}

function decode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new Error(`database.url: the ${what} is not valid percent-encoding`);
  }
}

export const isSocket = (target: DatabaseTarget): boolean => target.host.startsWith('/');

/** Where a target points, for messages: never includes the password. */
export function describeTarget(target: DatabaseTarget): string {
  const where = isSocket(target)
    ? `the Unix socket ${target.host}/.s.PGSQL.${target.port}`
    : `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
  return `${where} (role "${target.user ?? '(operating system user)'}", database "${target.database ?? target.user ?? '(default)'}")`;
}

/** postgres.js options for a target; the caller adds pool size and hooks. */
export function postgresJsOptions(target: DatabaseTarget): PostgresJsOptions<Record<string, PostgresType>> {
  return {
    host: target.host,
    port: target.port,
    ...(target.user === undefined ? {} : { user: target.user }),
    ...(target.password === undefined ? {} : { pass: target.password }),
    ...(target.database === undefined ? {} : { database: target.database }),
    ssl: postgresJsSsl(target.sslmode),
    connection: { ...target.params },
  };
}

function postgresJsSsl(mode: SslMode): 'prefer' | 'require' | 'allow' | 'verify-full' | false {
  if (mode === 'disable') return false;
  // postgres.js has no verify-ca; verifying the host name as well is the stricter choice.
  if (mode === 'verify-ca') return 'verify-full';
  return mode;
}

/** node-postgres options (what pg-boss takes) for a target. */
export interface NodePostgresOptions {
  host: string;
  port: number;
  user?: string;
  password?: string;
  database?: string;
  ssl: boolean | { rejectUnauthorized: boolean };
  options?: string;
}

export function nodePostgresOptions(target: DatabaseTarget): NodePostgresOptions {
  return {
    host: target.host,
    port: target.port,
    ...(target.user === undefined ? {} : { user: target.user }),
    ...(target.password === undefined ? {} : { password: target.password }),
    ...(target.database === undefined ? {} : { database: target.database }),
    // node-postgres cannot fall back from TLS to plain, so allow and prefer connect without TLS.
    ssl: target.sslmode === 'require' ? { rejectUnauthorized: false } : target.sslmode.startsWith('verify') ? true : false,
    ...(target.params['options'] === undefined ? {} : { options: target.params['options'] }),
  };
}
