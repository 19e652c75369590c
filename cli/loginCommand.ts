// `kiln login`: saves the server URL and token the other client commands use.
import type { Command } from 'commander';
import { ApiClient } from './apiClient.js';
import { clientConfigPath, normalizeServer, writeClientConfigFile } from './clientConfig.js';
import { runClientCommand, UsageError } from './clientOutput.js';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

/**
 * `kiln login --server URL --token T`: checks the token against the server (GET /api/v1/user),
 * then writes both to the client's config file. `--token -` reads the token from stdin, so it
 * stays out of the process list and the shell history.
 */
export function loginCommand(program: Command): void {
  program
    .command('login')
    .description('store the server URL and a token (session token or API key) for the kiln client commands')
    .requiredOption('--server <url>', 'the kiln server, e.g. https://kiln.example.org')
    .requiredOption('--token <token>', 'a session token or an API key (SVC…); "-" reads it from stdin')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { server: string; token: string; json?: boolean }) => {
      await runClientCommand(opts.json === true, async (out) => {
        if (!/^https?:\/\/[^/]/i.test(opts.server)) throw new UsageError(`--server: ${JSON.stringify(opts.server)} is not an http:// or https:// URL`);
        const token = opts.token === '-' ? await readStdin() : opts.token;
        if (token === '') throw new UsageError('--token: empty');
        const server = normalizeServer(opts.server);
        const user = await new ApiClient({ server, token }).call<{ username: string }>('GET', '/user');
        const path = clientConfigPath(process.env);
        await writeClientConfigFile(path, { server, token });
        out.result({ server, user: user.username, config: path }, (r) => `logged in to ${r.server} as ${r.user} (saved in ${r.config})`);
      });
    });
}
