// The worker fetches a project's repository itself, after the server vetted the URL
// (services/projects/repositoryPolicy.ts). The server's own git commands never follow a redirect; the
// worker's fetch must not either, or a public repository URL that answers "302 Location:
// http://127.0.0.1:…/" (or a cloud's metadata address) makes the worker clone whatever the
// internal side serves, and the evaluation's failure text reports what it found there.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, normalize } from 'node:path';
import { checkoutCommit } from '../../worker/gitCheckout.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { tempDir } from '../support/nixStore.js';

const dir = tempDir('kiln-worker-redirects-');
const source = createFlakeRepo(join(dir, 'source'), { 'flake.nix': '{ outputs = { self }: { }; }' });
// A bare copy served over git's dumb HTTP protocol: plain files, after update-server-info.
const bare = join(dir, 'internal.git');
execFileSync('git', ['clone', '--quiet', '--bare', source.dir, bare]);
execFileSync('git', ['-C', bare, 'update-server-info']);

const listen = (server: Server) => new Promise<number>((done) => server.listen(0, '127.0.0.1', () => done((server.address() as AddressInfo).port)));

/** The "internal" git server: the bare repository's files, as a dumb HTTP remote. */
const internal = createServer((req, res) => {
  const path = normalize(decodeURIComponent((req.url ?? '/').split('?')[0]!)).replace(/^\/+/, '');
  const file = join(bare, path);
  if (!file.startsWith(bare) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  createReadStream(file).pipe(res);
});

t.before(async () => {
  const internalPort = await listen(internal);
  // The "public" repository: every request is sent on to the internal one.
  redirector = createServer((req, res) => {
    res.writeHead(302, { location: `http://127.0.0.1:${internalPort}${(req.url ?? '/').replace(/^\/public/, '')}` }).end();
  });
  redirectorPort = await listen(redirector);
});
let redirector: Server;
let redirectorPort = 0;
t.teardown(() => {
  internal.close();
  redirector.close();
});

t.test('the worker\'s fetch does not follow a repository\'s redirect', async (t) => {
  const checkout = await checkoutCommit(join(dir, 'worker'), randomUUID(), `http://127.0.0.1:${redirectorPort}/public`, source.commit, process.env);
  t.equal(checkout.ok, false, 'nothing is cloned from where the redirect points');
  if (!checkout.ok) t.equal(checkout.failure.reason, 'fetch_failed');
});

t.test('the same repository without the redirect is fetched (the test\'s server works)', async (t) => {
  const internalPort = (internal.address() as AddressInfo).port;
  const checkout = await checkoutCommit(join(dir, 'worker'), randomUUID(), `http://127.0.0.1:${internalPort}/`, source.commit, process.env);
  t.equal(checkout.ok, true, JSON.stringify(checkout));
});
