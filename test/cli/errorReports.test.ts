// Error reports (cli/errorReports.ts): a forced 500 of a running kiln reaches a loopback stand-in of
// a Sentry DSN as a real envelope, without the caller's bearer token; credentials in an error's
// message are cut out; a DSN outside outbound.allowedNetworks gets nothing; enabled without a DSN,
// kiln says that reports go nowhere; disabled, nothing is sent even with a DSN.
import t from 'tap';
import { loadConfig, createLogger } from '../../config/index.js';
import { openErrorReports, scrubSecrets } from '../../cli/errorReports.js';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { startReceiver, type ReceivedRequest } from '../support/events.js';
import { eventually } from '../support/eventually.js';

interface EnvelopeEvent {
  exception?: { values?: { type?: string; value?: string }[] };
  extra?: Record<string, unknown>;
  request?: unknown;
  release?: string;
}

/** A Sentry envelope: a header line, then an item header and its payload per item. */
function eventOf(request: ReceivedRequest): EnvelopeEvent {
  const [header, itemHeader, payload] = request.body.split('\n');
  t.ok(JSON.parse(header!).event_id, 'the envelope header names the event');
  t.equal((JSON.parse(itemHeader!) as { type: string }).type, 'event');
  return JSON.parse(payload!) as EnvelopeEvent;
}

t.test('a 500 of a running server is reported, without the bearer token', async (t) => {
  const receiver = await startReceiver(t);
  const kiln = await startTestKiln(t, { 'errorReport.enable': true, 'errorReport.dsn': `http://publickey@127.0.0.1:${receiver.port}/42` });
  const ada = await signUp(kiln, 'ada');
  // The organizations table gone: listing them is an unexpected error, a 500.
  await kiln.sql`alter table organizations rename to organizations_gone`;
  t.teardown(() => kiln.sql`alter table organizations_gone rename to organizations`.then(() => undefined));
  const res = await kiln.api('GET', '/orgs', { token: ada.token });
  t.same([res.status, res.code], [500, 'internal']);
  await receiver.waitFor(1);
  const [sent] = receiver.requests;
  t.equal(sent!.method, 'POST');
  t.match(sent!.url, /^\/api\/42\/envelope\/\?/);
  t.notOk(sent!.body.includes(ada.token), 'the bearer token is nowhere in the envelope');
  const event = eventOf(sent!);
  t.match(event.exception?.values?.[0]?.value, /organizations/);
  t.match(event.extra, { source: 'request', method: 'get', route: '/api/v1/orgs' });
  t.equal(event.request, undefined, 'no request data');
  t.match(event.release, /^kiln@/);
});

t.test('credentials in a message are cut out before sending', async (t) => {
  t.equal(scrubSecrets('GET https://u:hunter2@host/x?token=abc&b=1 with Bearer SVCx.y'), 'GET https://u:[secret]@host/x?token=[secret]&b=1 with Bearer [secret]');
  const receiver = await startReceiver(t);
  const config = loadConfig({ scope: 'server', env: {}, overrides: { 'errorReport.enable': true, 'errorReport.dsn': `http://k@127.0.0.1:${receiver.port}/7`, 'outbound.allowedNetworks': ['127.0.0.0/8'] } }).values;
  const reports = await openErrorReports(config, createLogger(config), 'kiln@test');
  t.teardown(() => reports.close());
  reports.report(new Error('upstream refused Basic dXNlcjpodW50ZXIy at https://c.example/x?token=t0k'), { source: 'test' });
  await reports.flush();
  await receiver.waitFor(1);
  const body = receiver.requests[0]!.body;
  t.notMatch(body, /dXNlcjpodW50ZXIy|t0k/);
  t.match(eventOf(receiver.requests[0]!).exception?.values?.[0]?.value, 'upstream refused Basic [secret] at https://c.example/x?token=[secret]');
});

t.test('a DSN outside outbound.allowedNetworks receives nothing', async (t) => {
  const receiver = await startReceiver(t);
  const lines: string[] = [];
  const config = loadConfig({ scope: 'server', env: {}, overrides: { 'errorReport.enable': true, 'errorReport.dsn': `http://k@127.0.0.1:${receiver.port}/7` } }).values;
  const reports = await openErrorReports(config, createLogger(config, { destination: { write: (l: string) => void lines.push(l) } }), 'kiln@test');
  t.teardown(() => reports.close());
  reports.report(new Error('boom'), {});
  await eventually(() => lines.some((l) => l.includes('an error report could not be sent')), { message: 'the refusal is logged' });
  t.equal(receiver.requests.length, 0);
});

t.test('enabled without a DSN: a warning that reports go nowhere', async (t) => {
  const lines: string[] = [];
  const config = loadConfig({ scope: 'server', env: {}, overrides: { 'errorReport.enable': true } }).values;
  const reports = await openErrorReports(config, createLogger(config, { destination: { write: (l: string) => void lines.push(l) } }), 'kiln@test');
  reports.report(new Error('boom'), {});
  t.match(lines.join('\n'), /error reports go nowhere/);
});

t.test('errorReport.enable off: nothing is sent, even with a DSN', async (t) => {
  const receiver = await startReceiver(t);
  const dsn = `http://k@127.0.0.1:${receiver.port}/7`;
  const lines: string[] = [];
  const open = (enable: boolean) => {
    const config = loadConfig({ scope: 'server', env: {}, overrides: { 'errorReport.enable': enable, 'errorReport.dsn': dsn, 'outbound.allowedNetworks': ['127.0.0.0/8'] } }).values;
    return openErrorReports(config, createLogger(config, { destination: { write: (l: string) => void lines.push(l) } }), 'kiln@test');
  };
  const off = await open(false);
  off.report(new Error('off'), {});
  await off.close();
  t.same(lines, [], 'off: not a word');
  // The same report with the option on arrives: the receiver would have seen the first.
  const on = await open(true);
  on.report(new Error('on'), {});
  await receiver.waitFor(1);
  await on.close();
  t.same(receiver.requests.map((r) => eventOf(r).exception?.values?.[0]?.value), ['on']);
});
