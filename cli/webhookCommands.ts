// `kiln webhook list|create|test|deliveries` (spec: "Webhooks, events, workers, metrics"): the
// webhooks of one scope, chosen by exactly one of --project, --cache or --instance (superusers).
// The signing secret is in create's answer only.
import { Command, Option } from 'commander';
import { deliveryStatuses, type DeliveryPage, type DeliveryView, type WebhookView, type WebhookWithSecret } from '../protocol/index.js';
import type { ApiClient } from './apiClient.js';
import { connect } from './clientConnection.js';
import { formatDate, formatTable, jsonOption, repeated, runClientCommand, UsageError } from './clientOutput.js';
import { projectRef, segment } from './resourceArguments.js';

interface ScopeOptions {
  project?: string;
  cache?: string;
  instance?: boolean;
}

/** The scope's /…/webhooks path. */
async function scopePath(client: ApiClient, opts: ScopeOptions): Promise<string> {
  const given = [opts.project !== undefined, opts.cache !== undefined, opts.instance === true].filter(Boolean).length;
  if (given !== 1) throw new UsageError('name the webhooks\' scope with exactly one of --project <org/project>, --cache <cache> or --instance');
  if (opts.project !== undefined) return `/projects/${segment(await projectRef(client, opts.project))}/webhooks`;
  if (opts.cache !== undefined) return `/caches/${segment(opts.cache)}/webhooks`;
  return '/admin/webhooks';
}

const withScope = (command: Command): Command => command
  .option('--project <org/project>', 'a project\'s webhooks')
  .option('--cache <cache>', 'a cache\'s webhooks')
  .option('--instance', 'the instance\'s webhooks (superusers)')
  .addOption(jsonOption());

const deliveriesTable = (ds: readonly DeliveryView[]): string => formatTable(['DELIVERY', 'EVENT', 'STATUS', 'ATTEMPTS', 'HTTP', 'CREATED', 'ERROR'], ds.map((d) => [
  d.id, d.event, d.status, `${d.attempts}/${d.max_attempts}`, d.last_response_status === null ? '-' : String(d.last_response_status), formatDate(d.created_at), d.last_error ?? '',
]));

export function webhookCommands(program: Command): void {
  const webhook = program.command('webhook').description('webhooks: signed HTTP deliveries of events to a URL');

  withScope(webhook.command('list').description('the webhooks of a scope'))
    .action(async (opts: ScopeOptions & { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const hooks = await client.call<WebhookView[]>('GET', await scopePath(client, opts));
      out.result(hooks, (hs) => formatTable(['ID', 'URL', 'EVENTS', 'ACTIVE', 'LAST DELIVERY'], hs.map((h) => [
        h.id, h.url, h.events.join(',') || '*', h.active ? 'yes' : 'no', h.last_delivery ? `${h.last_delivery.status} ${formatDate(h.last_delivery.at)}` : '-',
      ])));
    }));

  withScope(webhook.command('create').description('create a webhook; its signing secret is printed this once').argument('<url>'))
    .option('-e, --event <glob>', 'an event glob such as build.* (repeatable; none: every event in scope)', repeated, [] as string[])
    .option('--description <text>')
    .option('--inactive', 'create it switched off')
    .action(async (url: string, opts: ScopeOptions & { event: string[]; description?: string; inactive?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const body = { url, events: opts.event, active: opts.inactive !== true, ...(opts.description === undefined ? {} : { description: opts.description }) };
      const made = await client.call<WebhookWithSecret>('PUT', await scopePath(client, opts), { body });
      out.note(`created webhook ${made.id}; its signing secret (X-Service-Signature) is shown only now:`);
      out.result(made, (h) => h.secret);
    }));

  withScope(webhook.command('test').description('send a webhook.ping at once and show the delivery').argument('<id>'))
    .action(async (id: string, opts: ScopeOptions & { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const delivery = await client.call<DeliveryView>('POST', `${await scopePath(client, opts)}/${segment(id)}/test`);
      out.result(delivery, (d) => deliveriesTable([d]));
      if (delivery.status !== 'delivered') process.exitCode = 1;
    }));

  withScope(webhook.command('deliveries').description('a webhook\'s deliveries, newest first').argument('<id>'))
    .addOption(new Option('--status <status>', 'only deliveries in this state').choices(deliveryStatuses))
    .option('--page <n>', 'page number, from 1')
    .option('--per-page <n>', 'deliveries per page (default 50, at most 200)')
    .action(async (id: string, opts: ScopeOptions & { status?: string; page?: string; perPage?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const page = await client.call<DeliveryPage>('GET', `${await scopePath(client, opts)}/${segment(id)}/deliveries`, { query: { status: opts.status, page: opts.page, per_page: opts.perPage } });
      out.result(page, (p) => `${deliveriesTable(p.deliveries)}\npage ${p.page} of ${Math.max(1, Math.ceil(p.total / p.per_page))} (${p.total} deliver${p.total === 1 ? 'y' : 'ies'})`);
    }));
}
