// Where the kiln client finds its server and token (DESIGN.md, "The model"): the file
// `kiln login` writes, $XDG_CONFIG_HOME/kiln/config.json (default ~/.config/kiln/config.json,
// mode 0600: it holds a credential), overridden by KILN_SERVER and KILN_TOKEN so that CI scripts
// need no login step. The environment is passed in, never read from a global here.
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { describeIssue } from '../protocol/index.js';

export const ClientConfigFile = z.object({
  server: z.string().url(),
  token: z.string().min(1),
});
export type ClientConfigFile = z.infer<typeof ClientConfigFile>;

export interface ClientSettings {
  /** the server's base URL without a trailing slash, e.g. https://kiln.example.org */
  server: string;
  token: string;
}

export type ClientEnv = Readonly<Record<string, string | undefined>>;

export class ClientConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClientConfigError';
  }
}

export function clientConfigPath(env: ClientEnv): string {
  const base = env['XDG_CONFIG_HOME'] && env['XDG_CONFIG_HOME'].startsWith('/') ? env['XDG_CONFIG_HOME'] : join(env['HOME'] ?? homedir(), '.config');
  return join(base, 'kiln', 'config.json');
}

export const normalizeServer = (url: string): string => url.replace(/\/+$/, '');

/** The file's contents, or null when there is none; a file kiln cannot read is an error naming it. */
export async function readClientConfigFile(path: string): Promise<ClientConfigFile | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ClientConfigError(`cannot read ${path}: ${(e as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ClientConfigError(`${path} is not valid JSON (${(e as Error).message}); run kiln login again`);
  }
  const parsed = ClientConfigFile.safeParse(value);
  if (!parsed.success) {
    const { field, reason } = describeIssue(parsed.error, 'file');
    throw new ClientConfigError(`${path}: ${field}: ${reason}; run kiln login again`);
  }
  return parsed.data;
}

/** Written to a temporary file with mode 0600 and renamed into place, so no reader sees half a file. */
export async function writeClientConfigFile(path: string, config: ClientConfigFile): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}

/** The server and token to use: KILN_SERVER / KILN_TOKEN over the file's values. */
export async function loadClientSettings(env: ClientEnv): Promise<ClientSettings> {
  const path = clientConfigPath(env);
  const envServer = env['KILN_SERVER'] || undefined;
  const envToken = env['KILN_TOKEN'] || undefined;
  const file = envServer && envToken ? null : await readClientConfigFile(path);
  const server = envServer ?? file?.server;
  const token = envToken ?? file?.token;
  if (!server || !token) {
    throw new ClientConfigError(
      `no ${server ? 'token' : 'server'} configured: run \`kiln login --server URL --token TOKEN\` (writes ${path}) or set KILN_SERVER and KILN_TOKEN`,
    );
  }
  if (!/^https?:\/\/[^/]/i.test(server)) throw new ClientConfigError(`the server ${JSON.stringify(server)} is not an http:// or https:// URL`);
  return { server: normalizeServer(server), token };
}
