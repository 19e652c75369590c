// A `kiln serve` on its defaults (filesystem blobs, no Redis, no collector, no SMTP, no SSH, no Git
// host application, no OIDC) loads none of the client libraries those features need: each is
// loaded when the configuration or the first use asks for it (docs/http.md, "Memory at rest"). The process records every package its
// main thread resolves (test/support/recordPackages.mjs).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { testDatabase } from '../support/db.js';
import { freePort } from '../support/kiln.js';
import { startServerProcess } from '../support/serverProcess.js';

const recorder = fileURLToPath(new URL('../support/recordPackages.mjs', import.meta.url));
const LOADED_WHEN_ASKED = [
  '@aws-sdk/client-s3', '@aws-sdk/lib-storage', 'ioredis', '@opentelemetry/sdk-metrics', '@opentelemetry/exporter-metrics-otlp-proto', 'nodemailer', 'ssh2', 'ws',
  // the Git host application's client (services/gitHosts/hostApi.ts) and webhook check (hookReceiver.ts), OIDC sign-in (services/accounts/oidc.ts)
  '@octokit/auth-app', '@octokit/request', '@octokit/webhooks', 'openid-client', 'oauth4webapi',
];

t.test('a server on its defaults loads no client library it does not use', async (t) => {
  const db = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-lazy-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const record = join(baseDir, 'packages.txt');
  const server = await startServerProcess(db.url, join(baseDir, 'server'), await freePort(), [], {
    NODE_OPTIONS: `--import ${recorder}`, KILN_RECORD_PACKAGES: record,
  });
  t.teardown(() => server.child.kill('SIGKILL'));
  // a request through the API and the cache routes, so what a first request loads is counted too
  t.equal((await fetch(`${server.url}/api/v1/health`)).status, 200);
  t.equal((await fetch(`${server.url}/cache/none/nix-cache-info`)).status, 404);
  const loaded = (await readFile(record, 'utf8')).split('\n').filter(Boolean);
  t.ok(loaded.includes('postgres') && loaded.includes('pg-boss'), 'the recorder sees what the server does load');
  t.same(LOADED_WHEN_ASKED.filter((name) => loaded.includes(name)), [], 'none of the libraries loaded when asked');
});
