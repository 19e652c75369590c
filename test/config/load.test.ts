// Sources and precedence: defaults < JSON file < environment < flags < overrides.
import t from 'tap';
import { loadConfig, type LoadOptions } from '../../config/index.js';
import { fixtureFile } from './fixtureFile.js';

const load = (options: Partial<LoadOptions> = {}) => loadConfig({ scope: 'server', env: {}, ...options });


t.test('with nothing given every option has its default', async (t) => {
  const loaded = load();
  t.equal(loaded.values.port, 3000);
  t.equal(loaded.values['upload.bytesBudget'], 8589934592);
  t.equal(loaded.values['database.url'], 'postgres://kiln@/kiln?host=/var/run/postgresql');
  t.equal(loaded.values['s3.endpoint'], null);
  t.same(loaded.values['http.trustedProxies'], ['127.0.0.1/8', '::1/128']);
  t.same(loaded.sourceOf('port'), { kind: 'default' });
  t.same(loaded.warnings, []);
});

t.test('each kind of value from the environment', async (t) => {
  const { values, sourceOf } = load({
    env: {
      SERVICE_USE_TLS: 'no',
      SERVICE_PUBLIC_STATS: 'YES',
      SERVICE_UPLOAD_BYTES_BUDGET: '1024',
      SERVICE_PORT: '8080',
      SERVICE_S3_ENDPOINT: 'http://127.0.0.1:9000',
      SERVICE_S3_ACCESS_KEY_ID: 'null',
      SERVICE_HTTP_TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.1',
      SERVICE_OIDC_SCOPES: '["openid","groups"]',
      SERVICE_LOG_LEVEL_DEFAULT: 'debug',
      SERVICE_LOG_LEVEL_CACHE: 'null',
      SERVICE_PERMISSIONS_CREATE_CACHE: 'superusers',
      SERVICE_WORKER_BUILD_MAX_CORES: '4',
      SERVICE_WORKER_SYSTEM_FEATURES: '',
      SERVICE_REDIS_URL: 'redis://127.0.0.1:6379',
    },
  });
  t.equal(values.useTls, false);
  t.equal(values.publicStats, true);
  t.equal(values['upload.bytesBudget'], 1024);
  t.equal(values.port, 8080);
  t.equal(values['s3.endpoint'], 'http://127.0.0.1:9000');
  t.equal(values['s3.accessKeyId'], null);
  t.same(values['http.trustedProxies'], ['10.0.0.0/8', '192.168.1.1']);
  t.same(values['oidc.scopes'], ['openid', 'groups']);
  t.equal(values['log.level.default'], 'debug');
  t.equal(values['log.level.cache'], null);
  t.equal(values['permissions.createCache'], 'superusers');
  t.equal(values['worker.build.maxCores'], 4);
  t.same(values['worker.system.features'], []);
  t.equal(values['redis.url'], 'redis://127.0.0.1:6379');
  t.same(sourceOf('port'), { kind: 'env', name: 'SERVICE_PORT' });
});

t.test('bool text accepts true/false/1/0/yes/no in any case', async (t) => {
  for (const [text, value] of [['true', true], ['1', true], ['Yes', true], ['FALSE', false], ['0', false], ['no', false]] as const) {
    t.equal(load({ env: { SERVICE_USE_TLS: text } }).values.useTls, value, text);
  }
});

t.test('each kind of value from a JSON file, nested or dotted', async (t) => {
  const file = fixtureFile(t.testdir(), {
    useTls: false,
    upload: { bytesBudget: 4096, concurrency: 2 },
    'nar.chunkBytes': 8192,
    s3: { endpoint: null, bucket: 'nars' },
    http: { localIps: ['10.0.0.0/8'] },
    environmentVariables: { NIX_PATH: 'nixpkgs=/x', DEBUG: null, RETRIES: 3, VERBOSE: true },
    log: { level: { default: 'warn', web: 'trace' } },
    reverseProxy: { proxyA: { extraConfig: ['a', 'b'] } },
    'localDb.sharedBuffers': '1GB',
    'localDb.port': 5433,
    worker: { build: { maxConcurrent: 4 }, id: '0b5e3c1a-9d2f-4c47-8a61-2f0c9e4d7b13' },
  });
  const { values, sourceOf } = load({ file });
  t.equal(values.useTls, false);
  t.equal(values['upload.bytesBudget'], 4096);
  t.equal(values['upload.concurrency'], 2);
  t.equal(values['nar.chunkBytes'], 8192);
  t.equal(values['s3.bucket'], 'nars');
  t.same(values['http.localIps'], ['10.0.0.0/8']);
  t.same(values.environmentVariables, { NIX_PATH: 'nixpkgs=/x', DEBUG: null, RETRIES: 3, VERBOSE: true });
  t.equal(values['log.level.default'], 'warn');
  t.equal(values['log.level.web'], 'trace');
  t.equal(values['reverseProxy.proxyA.extraConfig'], 'a\nb', 'a list of lines is joined');
  t.equal(values['localDb.sharedBuffers'], '1GB');
  t.equal(values['localDb.port'], 5433);
  t.equal(values['worker.build.maxConcurrent'], 4);
  t.same(sourceOf('upload.bytesBudget'), { kind: 'file', name: file });
});

t.test('each kind of value from flags, keyed by path', async (t) => {
  const server = load({ flags: { useTls: false, 'upload.bytesBudget': '2048', 'http.trustedProxies': '10.0.0.0/8', 'log.level.default': 'error' } });
  t.equal(server.values.useTls, false);
  t.equal(server.values['upload.bytesBudget'], 2048);
  t.same(server.values['http.trustedProxies'], ['10.0.0.0/8']);
  t.equal(server.values['log.level.default'], 'error');
  t.same(server.sourceOf('upload.bytesBudget'), { kind: 'flag', name: '--upload-bytes-budget' });
  t.same(server.sourceOf('useTls'), { kind: 'flag', name: '--use-tls' });

  const worker = loadConfig({ scope: 'worker', env: {}, flags: { 'worker.build.maxConcurrent': '4', 'worker.port': '3200', 'worker.environmentVariables': '{"A":"b"}' } });
  t.equal(worker.values['worker.build.maxConcurrent'], 4);
  t.equal(worker.values['worker.port'], 3200);
  t.same(worker.values['worker.environmentVariables'], { A: 'b' });
  t.same(worker.sourceOf('worker.build.maxConcurrent'), { kind: 'flag', name: '--build-max-concurrent' });
  t.same(worker.sourceOf('worker.port'), { kind: 'flag', name: '--port' });
});

t.test('precedence: file < env < flag < override', async (t) => {
  const file = fixtureFile(t.testdir(), { 'upload.concurrency': 1 });
  const env = { SERVICE_UPLOAD_CONCURRENCY: '2' };
  const flags = { 'upload.concurrency': '3' };
  const overrides = { 'upload.concurrency': 4 };
  const all = load({ file, env, flags, overrides });
  t.equal(all.values['upload.concurrency'], 4);
  t.same(all.sourceOf('upload.concurrency'), { kind: 'override' });
  const noOverride = load({ file, env, flags });
  t.equal(noOverride.values['upload.concurrency'], 3);
  t.same(noOverride.sourceOf('upload.concurrency'), { kind: 'flag', name: '--upload-concurrency' });
  const noFlag = load({ file, env });
  t.equal(noFlag.values['upload.concurrency'], 2);
  t.same(noFlag.sourceOf('upload.concurrency'), { kind: 'env', name: 'SERVICE_UPLOAD_CONCURRENCY' });
  t.equal(load({ file, overrides: { 'upload.concurrency': undefined } }).values['upload.concurrency'], 1, 'an undefined override is absent');
  const fileOnly = load({ file });
  t.equal(fileOnly.values['upload.concurrency'], 1);
  t.same(fileOnly.sourceOf('upload.concurrency'), { kind: 'file', name: file });
});

t.test('options without an environment variable ignore it, with a warning', async (t) => {
  const loaded = load({ env: { SERVICE_DOMAIN: 'ci.example.org', SERVICE_UPLOAD_BYTE_BUDGET: '1', HOME: '/root' } });
  t.equal(loaded.values.domain, null);
  t.same(loaded.warnings, [
    'SERVICE_DOMAIN is ignored: domain has no environment variable; set it in the config file or with --domain',
    'SERVICE_UPLOAD_BYTE_BUDGET is ignored: it names no option; did you mean "SERVICE_UPLOAD_BYTES_BUDGET"?',
  ]);
});

t.test("environmentVariables' SERVICE_* entries win over the file, lose to flags, and null unsets", async (t) => {
  const file = fixtureFile(t.testdir(), { port: 3001, environmentVariables: { SERVICE_PORT: 4000, SERVICE_LISTEN_ADDR: null, OTHER: 'x' } });
  const loaded = load({ file, env: { SERVICE_LISTEN_ADDR: '10.1.1.1' } });
  t.equal(loaded.values.port, 4000);
  t.same(loaded.sourceOf('port'), { kind: 'env', name: 'environmentVariables.SERVICE_PORT' });
  t.equal(loaded.values.listenAddr, '127.0.0.1', 'null unset the real variable');
  t.equal(load({ file, flags: { port: '5000' } }).values.port, 5000);
  const worker = loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.environmentVariables': { SERVICE_WORKER_PORT: '3300' } } });
  t.equal(worker.values['worker.port'], 3300);
});

t.test('the values are frozen, lists included', async (t) => {
  const { values } = load();
  t.ok(Object.isFrozen(values));
  t.ok(Object.isFrozen(values['http.trustedProxies']));
  t.throws(() => (values['http.trustedProxies'] as string[]).push('x'));
});

t.test('process.env is read when no env is given', async (t) => {
  const before = process.env.SERVICE_RETENTION_DAYS;
  process.env.SERVICE_RETENTION_DAYS = '7';
  t.teardown(() => {
    if (before === undefined) delete process.env.SERVICE_RETENTION_DAYS;
    else process.env.SERVICE_RETENTION_DAYS = before;
  });
  t.equal(loadConfig({ scope: 'server' }).values.retentionDays, 7);
});
