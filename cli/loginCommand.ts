// `kiln login` and `kiln whoami`: saving the server URL and a token the other client commands use,
// and asking who that token is.
import type { Command } from 'commander';
import type { UserView } from '../protocol/index.js';
import { ApiClient } from './apiClient.js';
import { clientConfigPath, normalizeServer, writeClientConfigFile } from './clientConfig.js';
import { connect } from './clientConnection.js';
import { formatFields, jsonOption, runClientCommand, UsageError, type Output } from './clientOutput.js';
import { ask, readStdin } from './prompt.js';

/** GET /api/v1/config's answer, as far as login needs it. */
interface ServerFeatures {
  oidc: boolean;
  oidc_required: boolean;
}

/**
 * A session token by asking: the user name and password (POST /auth/basic/login), or, when the
 * server signs in only by OIDC (or --oidc), the provider's URL to open and the token the sign-in
 * shows, pasted back.
 */
/** https, or http to this machine itself: a password sent there is read by nobody on the way. */
function sentPrivately(server: string): boolean {
  const url = new URL(server);
  return url.protocol === 'https:' || ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || url.hostname.startsWith('127.');
}

async function signIn(server: string, oidc: boolean, out: Output): Promise<string> {
  const anonymous = new ApiClient({ server, token: '' });
  const features = await anonymous.call<ServerFeatures>('GET', '/config');
  if (oidc || features.oidc_required) {
    if (!features.oidc) throw new UsageError(`${server} has no OIDC sign-in; log in with a user name and password, or --token`);
    const url = await anonymous.call<string>('POST', '/auth/oauth/authorize');
    out.note(`Open this address in a browser and sign in:\n\n  ${url}\n`);
    const [token] = await ask([{ text: 'Then paste the session token the sign-in shows: ', secret: true }]);
    return token!.trim();
  }
  if (!sentPrivately(server)) out.note(`warning: ${server} is plain http: the password crosses the network readable by anyone on the way; use https`);
  const [loginname, password] = await ask([{ text: 'User name: ' }, { text: 'Password: ', secret: true }]);
  if (!loginname!.trim() || !password) throw new UsageError('the user name and the password must not be empty');
  return anonymous.call<string>('POST', '/auth/basic/login', { body: { loginname: loginname!.trim(), password } });
}

/**
 * `kiln login --server URL [--token T]`: without --token it asks for a user name and password (or
 * shows the OIDC address); `--token -` reads the token from stdin, so it stays out of the process
 * list and the shell history. The token is checked against the server (GET /api/v1/user), then
 * both are written to the client's config file.
 */
export function loginCommand(program: Command): void {
  program
    .command('login')
    .description('sign in to a kiln server and store the server URL and token for the kiln client commands')
    .requiredOption('--server <url>', 'the kiln server, e.g. https://kiln.example.org')
    .option('--token <token>', 'a session token or an API key (SVC…); "-" reads it from stdin; absent: ask for a user name and password')
    .option('--oidc', 'sign in through the server\'s OIDC provider: prints the address to open, then asks for the token')
    .addOption(jsonOption())
    .action(async (opts: { server: string; token?: string; oidc?: boolean; json?: boolean }) => {
      await runClientCommand(opts.json === true, async (out) => {
        if (!/^https?:\/\/[^/]/i.test(opts.server)) throw new UsageError(`--server: ${JSON.stringify(opts.server)} is not an http:// or https:// URL`);
        const server = normalizeServer(opts.server);
        const token = opts.token === undefined ? await signIn(server, opts.oidc === true, out) : opts.token === '-' ? await readStdin() : opts.token;
        if (token === '') throw new UsageError('--token: empty');
        const user = await new ApiClient({ server, token }).call<UserView>('GET', '/user');
        const path = clientConfigPath(process.env);
        await writeClientConfigFile(path, { server, token });
        out.result({ server, user: user.username, config: path }, (r) => `logged in to ${r.server} as ${r.user} (saved in ${r.config})`);
      });
    });

  program.command('whoami').description('the user the saved login (or KILN_SERVER / KILN_TOKEN) acts as')
    .addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const user = await client.call<UserView>('GET', '/user');
      out.result({ server: client.settings.server, ...user }, (u) => formatFields([
        ['User', u.username],
        ['Name', u.name || '-'],
        ['E-mail', u.email ?? '-'],
        ['Server', u.server],
        ...(u.superuser ? [['Superuser', 'yes'] as [string, string]] : []),
      ]));
    }));
}
