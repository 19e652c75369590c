// `kiln org list|show|create|delete`: organizations (spec: "Organizations").
import type { Command } from 'commander';
import type { OrganizationView } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatDate, formatFields, formatTable, jsonOption, runClientCommand } from './clientOutput.js';
import { requireConfirmation } from './confirmation.js';
import { segment } from './resourceArguments.js';

const showOrganization = (o: OrganizationView): string => formatFields([
  ['Name', o.name],
  ['Display name', o.display_name || '-'],
  ['Description', o.description || '-'],
  ['Your role', o.role ?? '-'],
  ['Created', formatDate(o.created_at)],
  ['SSH key', o.ssh_public_key],
]);

export function orgCommands(program: Command): void {
  const org = program.command('org').description('organizations: they own projects and build servers');

  org.command('list').description('the organizations you may see').addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const orgs = await (await connect()).call<OrganizationView[]>('GET', '/orgs');
      out.result(orgs, (os) => formatTable(['NAME', 'DISPLAY NAME', 'ROLE', 'CREATED'], os.map((o) => [o.name, o.display_name || '-', o.role ?? '-', formatDate(o.created_at)])));
    }));

  org.command('show').description('one organization').argument('<org>').addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      out.result(await (await connect()).call<OrganizationView>('GET', `/orgs/${segment(name)}`), showOrganization);
    }));

  org.command('create').description('create an organization; you become its admin').argument('<org>', 'its name, as paths spell it')
    .option('--display-name <text>', 'the name people read')
    .option('--description <text>')
    .addOption(jsonOption())
    .action(async (name: string, opts: { displayName?: string; description?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const body = { name, ...(opts.displayName === undefined ? {} : { display_name: opts.displayName }), ...(opts.description === undefined ? {} : { description: opts.description }) };
      const made = await (await connect()).call<OrganizationView>('PUT', '/orgs', { body });
      out.result(made, (o) => `created organization "${o.name}"`);
    }));

  org.command('delete').description('delete an organization with its projects').argument('<org>')
    .option('-y, --yes', 'do not ask for confirmation (required with --json)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { yes?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      await requireConfirmation(`Delete organization "${name}" with all its projects?`, { yes: opts.yes === true, json: opts.json === true }, 'deleted');
      await client.call('DELETE', `/orgs/${segment(name)}`);
      out.result({ organization: name, deleted: true }, (r) => `deleted organization "${r.organization}"`);
    }));
}
