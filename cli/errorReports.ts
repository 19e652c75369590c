// Error reports (errorReport.enable, errorReport.dsn; docs/metrics.md): unexpected server errors
// (500s, crashed actors, unhandled rejections) sent with @sentry/node to the operator's DSN. A client
// of this server's own, not Sentry's global one, so servers in one process (tests) keep theirs apart;
// no default integration (no patched modules, no request capture), and the envelopes go through
// kiln's outbound client, so outbound.allowedNetworks applies to the DSN's host like to any other.
// What is sent: the error's type, message and stack, and the context kiln names (request id, method,
// route pattern; actor kind). Never headers, bodies, users or tokens: beforeSend also strips anything
// that looks like a credential from messages.
import type { Config, Logger } from '../config/index.js';
import { createOutboundClient } from '../storage/index.js';

export interface ErrorReports {
  /** Sends `error` with `context` (plain fields, no secrets); nothing when reports are off. */
  report(error: unknown, context: Record<string, string | number>): void;
  /** Waits up to `timeoutMs` for reports on their way. */
  flush(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const off: ErrorReports = { report: () => undefined, flush: async () => undefined, close: async () => undefined };

/** Credentials a message may carry: Authorization values, token-like query parameters, URL passwords. */
const SECRETS: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[^\s"',]+/gi, '$1 [secret]'],
  [/([?&](?:token|access_token|key|password|secret)=)[^&\s"']+/gi, '$1[secret]'],
  [/(\/\/[^/@\s:]+:)[^@\s/]+@/g, '$1[secret]@'],
];

export function scrubSecrets(text: string): string {
  return SECRETS.reduce((t, [pattern, replacement]) => t.replace(pattern, replacement), text);
}

/** The event without request data, user, breadcrumbs, and with credentials cut out of its texts. */
function scrubEvent<E extends { request?: unknown; user?: unknown; breadcrumbs?: unknown; message?: string; exception?: { values?: { value?: string }[] } }>(event: E): E {
  delete event.request;
  delete event.user;
  delete event.breadcrumbs;
  if (event.message !== undefined) event.message = scrubSecrets(event.message);
  for (const value of event.exception?.values ?? []) if (value.value !== undefined) value.value = scrubSecrets(value.value);
  return event;
}

export async function openErrorReports(config: Pick<Config, 'errorReport.enable' | 'errorReport.dsn' | 'outbound.allowedNetworks'>, log: Logger, release: string): Promise<ErrorReports> {
  if (!config['errorReport.enable']) return off;
  const dsn = config['errorReport.dsn'];
  if (dsn === null) {
    // kiln has no maintainers' instance to send them to, and sends nothing anywhere it was not told.
    log.warn('errorReport.enable is on but errorReport.dsn is null: error reports go nowhere (kiln has no instance of its own to send them to); set errorReport.dsn to your Sentry project');
    return off;
  }
  const { NodeClient, Scope, createTransport, defaultStackParser } = await import('@sentry/node');
  const outbound = createOutboundClient({ allowedNetworks: config['outbound.allowedNetworks'] });
  const client = new NodeClient({
    dsn,
    release,
    integrations: [],
    stackParser: defaultStackParser,
    sendClientReports: false,
    beforeSend: (event) => scrubEvent(event),
    transport: (options) => createTransport(options, (request) => new Promise((resolve, reject) => {
      let outgoing;
      try {
        outgoing = outbound.request(new URL(options.url), { method: 'POST', headers: { 'Content-Type': 'application/x-sentry-envelope' } });
      } catch (e) {
        log.warn({ err: e }, 'an error report could not be sent');
        reject(e);
        return;
      }
      outgoing.on('error', (e) => {
        log.warn({ err: e }, 'an error report could not be sent');
        reject(e);
      });
      outgoing.on('response', (res) => {
        res.resume();
        resolve({
          statusCode: res.statusCode ?? 0,
          headers: { 'retry-after': res.headers['retry-after'] ?? null, 'x-sentry-rate-limits': (res.headers['x-sentry-rate-limits'] as string | undefined) ?? null },
        });
      });
      outgoing.end(request.body);
    })),
  });
  const scope = new Scope();
  scope.setClient(client);
  client.init();
  log.info({ dsn: new URL(dsn).host }, 'unexpected errors are reported to the configured errorReport.dsn');
  return {
    report(error, context) {
      scope.captureException(error, { captureContext: { extra: context } });
    },
    async flush(timeoutMs = 2000) {
      await client.flush(timeoutMs);
    },
    async close() {
      await client.close(2000);
      outbound.close();
    },
  };
}
