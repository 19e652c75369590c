// `kiln key list|create|delete`: the API keys of the signed-in user (spec: "User"). The secret is
// in create's answer only; creating and deleting need a session (kiln login with a password or
// OIDC), not an API key.
import type { Command } from 'commander';
import type { ApiKeyView, CreatedApiKeyView } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatDate, formatTable, jsonOption, repeated, runClientCommand, UsageError } from './clientOutput.js';
import { requireConfirmation } from './confirmation.js';

function days(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]{0,4}$/.test(text)) throw new UsageError(`--expires-in-days takes a whole number of days from 1, not ${JSON.stringify(text)}`);
  return Number(text);
}

export function keyCommands(program: Command): void {
  const key = program.command('key').description('your API keys (SVC…): tokens for CI and scripts with a chosen set of permissions');

  key.command('list').description('your API keys (never their secrets)').addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const keys = await (await connect()).call<ApiKeyView[]>('GET', '/user/keys');
      out.result(keys, (ks) => formatTable(['NAME', 'PREFIX', 'PERMISSIONS', 'PINNED TO', 'EXPIRES', 'LAST USED'], ks.map((k) => [
        k.name, k.prefix, k.permissions.join(','), k.project ?? (k.cache ? `cache ${k.cache}` : '-'), formatDate(k.expires_at), formatDate(k.last_used_at),
      ])));
    }));

  key.command('create').description('create an API key; its secret is printed this once').argument('<name>')
    .option('-p, --permission <name>', 'a permission the key carries (repeatable), e.g. viewProject, triggerEvaluation, viewCache, writeStore', repeated, [] as string[])
    .option('--project <org/project>', 'pin the key to one project')
    .option('--cache <cache>', 'pin the key to one cache')
    .option('--expires-in-days <n>', 'the key stops working after this many days')
    .option('--allowed-ip <cidr>', 'accept the key only from this address block (repeatable)', repeated, [] as string[])
    .addOption(jsonOption())
    .action(async (name: string, opts: { permission: string[]; project?: string; cache?: string; expiresInDays?: string; allowedIp: string[]; json?: boolean }) =>
      runClientCommand(opts.json === true, async (out) => {
        if (opts.permission.length === 0) throw new UsageError('name at least one --permission');
        const expires = days(opts.expiresInDays);
        const body = {
          name, permissions: opts.permission, allowed_ips: opts.allowedIp,
          ...(opts.project === undefined ? {} : { project: opts.project }),
          ...(opts.cache === undefined ? {} : { cache: opts.cache }),
          ...(expires === undefined ? {} : { expires_in_days: expires }),
        };
        const made = await (await connect()).call<CreatedApiKeyView>('POST', '/user/keys', { body });
        out.note(`created API key "${made.name}"; its secret is shown only now:`);
        out.result(made, (k) => k.secret);
      }));

  key.command('delete').description('delete one of your API keys; it stops working at once').argument('<name>')
    .option('-y, --yes', 'do not ask for confirmation (required with --json)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { yes?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      await requireConfirmation(`Delete API key "${name}"? Whatever uses it stops working.`, { yes: opts.yes === true, json: opts.json === true }, 'deleted');
      await client.call('DELETE', '/user/keys', { query: { name } });
      out.result({ key: name, deleted: true }, (r) => `deleted API key "${r.key}"`);
    }));
}
