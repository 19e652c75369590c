// Derived defaults are computed from the effective values of other options.
import { join } from 'node:path';
import t from 'tap';
import { loadConfig, optionAt, optionPaths, type LoadOptions } from '../../config/index.js';
import { derivedDefaults } from '../../config/derived.js';
import { DerivedDefault } from '../../config/option.js';

const load = (options: Partial<LoadOptions> = {}) => loadConfig({ scope: 'server', env: {}, ...options });

t.test('every default declared derived has its computation, and no other', async (t) => {
  const declared = optionPaths.filter((path) => optionAt(path).default instanceof DerivedDefault);
  t.same(Object.keys(derivedDefaults).sort(), [...declared].sort());
});

t.test('serveUrl: from domain, else from listenAddr:port; https when useTls', async (t) => {
  t.equal(load().values.serveUrl, 'https://127.0.0.1:3000');
  t.same(load().sourceOf('serveUrl'), { kind: 'derived' });
  t.equal(load({ overrides: { useTls: false, port: 8080 } }).values.serveUrl, 'http://127.0.0.1:8080');
  t.equal(load({ overrides: { domain: 'ci.example.org' } }).values.serveUrl, 'https://ci.example.org');
  t.equal(load({ overrides: { domain: 'ci.example.org', useTls: false } }).values.serveUrl, 'http://ci.example.org');
  t.equal(load({ overrides: { listenAddr: '0.0.0.0', useTls: false } }).values.serveUrl, 'http://localhost:3000');
  t.equal(load({ overrides: { listenAddr: '::1', useTls: false } }).values.serveUrl, 'http://[::1]:3000');
  const set = load({ env: { SERVICE_SERVE_URL: 'https://kiln.example.org' } });
  t.equal(set.values.serveUrl, 'https://kiln.example.org');
  t.same(set.sourceOf('serveUrl'), { kind: 'env', name: 'SERVICE_SERVE_URL' });
});

t.test('frontend.url follows serveUrl unless set', async (t) => {
  t.equal(load({ overrides: { serveUrl: 'https://a.example' } }).values['frontend.url'], 'https://a.example');
  t.equal(load({ overrides: { 'frontend.url': 'https://b.example' } }).values['frontend.url'], 'https://b.example');
});

t.test('localWorker follows worker.enable', async (t) => {
  t.equal(load().values.localWorker, false);
  t.equal(load({ overrides: { 'worker.enable': true } }).values.localWorker, true);
  t.equal(load({ overrides: { 'worker.enable': true, localWorker: false } }).values.localWorker, false);
});

t.test('reverseProxy.proxyB.enable is the opposite of proxyA', async (t) => {
  t.equal(load().values['reverseProxy.proxyB.enable'], true);
  t.equal(load({ overrides: { 'reverseProxy.proxyA.enable': true } }).values['reverseProxy.proxyB.enable'], false);
});

t.test('worker.nixDaemon.maxConnections is maxConcurrent * 9 + 16', async (t) => {
  t.equal(load().values['worker.nixDaemon.maxConnections'], 32 * 9 + 16);
  t.equal(loadConfig({ scope: 'worker', env: {}, flags: { 'worker.build.maxConcurrent': '4' } }).values['worker.nixDaemon.maxConnections'], 52);
});

t.test('worker.build.cgroup is the daemon cgroup only with build metrics', async (t) => {
  t.equal(load().values['worker.build.cgroup'], null);
  t.equal(load({ overrides: { 'worker.build.metrics': true } }).values['worker.build.cgroup'], '/sys/fs/cgroup/system.slice/nix-daemon.service');
});

t.test('worker.system.architectures is the host system', async (t) => {
  const expected = { x64: 'x86_64-linux', arm64: 'aarch64-linux' }[process.arch as 'x64' | 'arm64'];
  t.same(load().values['worker.system.architectures'], [expected]);
});

t.test('the other defaults the spec names in words', async (t) => {
  const { values } = load();
  t.equal(values['database.url'], 'postgres://kiln@/kiln?host=/var/run/postgresql');
  t.equal(values.baseDir, '/var/lib/kiln');
  t.equal(values['worker.baseDir'], '/var/lib/kiln-worker');
  t.equal(values['email.from.name'], 'kiln');
  t.equal(values['worker.gcrootsDir'], '/nix/var/nix/gcroots/kiln-worker');
  t.equal(values['worker.eval.cache.dir'], null);
});

t.test('database.urlFile wins over database.url', async (t) => {
  const dir = t.testdir({ url: 'postgres://kiln:pw@db.internal/kiln\n', bad: 'mysql://x\n', empty: '' });
  const loaded = load({ env: { SERVICE_DATABASE_URL: 'postgres://other/x', SERVICE_DATABASE_URL_FILE: join(dir, 'url') } });
  t.equal(loaded.values['database.url'], 'postgres://kiln:pw@db.internal/kiln');
  t.same(loaded.sourceOf('database.url'), { kind: 'derived', name: `database.urlFile (${join(dir, 'url')})` });
  t.throws(() => load({ overrides: { 'database.urlFile': join(dir, 'bad') } }), {
    message: `database.url=mysql://x from database.urlFile (${join(dir, 'bad')}): must be a URL starting with postgres:// or postgresql://`,
  });
  t.throws(() => load({ overrides: { 'database.urlFile': join(dir, 'empty') } }), {
    message: `database.urlFile="${join(dir, 'empty')}" from override: must be a readable file holding the database URL (secret file ${join(dir, 'empty')} is empty)`,
  });
  t.equal(loadConfig({ scope: 'worker', env: {}, overrides: { 'database.urlFile': join(dir, 'missing') } }).values['database.url'], 'postgres://kiln@/kiln?host=/var/run/postgresql', 'a worker never reads it');
});
