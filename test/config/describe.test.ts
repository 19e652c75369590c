// `kiln config print` / `kiln config check`, names, flags and the docs table.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  checkConfigFile, cliFlags, describeConfig, envName, flagName, loadConfig, optionPaths, renderConfig, renderOptionTable, maskValue,
} from '../../config/index.js';
import { fixtureFile } from './fixtureFile.js';

t.test('env and flag names come from the path', async (t) => {
  t.equal(envName('upload.bytesBudget'), 'SERVICE_UPLOAD_BYTES_BUDGET');
  t.equal(envName('worker.build.maxConcurrent'), 'SERVICE_WORKER_BUILD_MAX_CONCURRENT');
  t.equal(envName('s3.accessKeyId'), 'SERVICE_S3_ACCESS_KEY_ID');
  t.equal(flagName('upload.bytesBudget'), '--upload-bytes-budget');
  t.equal(flagName('worker.build.maxConcurrent'), '--build-max-concurrent');
  t.equal(flagName('worker.port'), '--port');
  t.equal(flagName('reverseProxy.proxyA.useCertHost'), '--reverse-proxy-proxy-a-use-cert-host');
});

t.test('cliFlags: server options for kiln serve, worker options for kiln worker, no clashes', async (t) => {
  const serve = cliFlags('server');
  const worker = cliFlags('worker');
  t.equal(serve.length + worker.length, optionPaths.length);
  t.ok(worker.every((f) => f.path.startsWith('worker.')));
  t.notOk(serve.some((f) => f.path.startsWith('worker.')));
  for (const flags of [serve, worker]) t.equal(new Set(flags.flatMap((f) => [f.flag, f.negation ?? f.flag])).size, flags.length * 2 - flags.filter((f) => !f.negation).length);
  t.match(serve.find((f) => f.path === 'upload.bytesBudget'), { flag: '--upload-bytes-budget', takesValue: true, valueName: 'n' });
  t.match(serve.find((f) => f.path === 'useTls'), { flag: '--use-tls', takesValue: false, negation: '--no-use-tls' });
  t.match(worker.find((f) => f.path === 'worker.port'), { flag: '--port', takesValue: true, valueName: 'port' });
  t.match(serve.find((f) => f.path === 'port')?.description, /^listen port \(port, default 3000, env SERVICE_PORT\)$/);
});

t.test('a flag round trip: the CLI hands cliFlags paths back to loadConfig', async (t) => {
  const flags = Object.fromEntries(cliFlags('worker').filter((f) => f.flag === '--build-max-concurrent').map((f) => [f.path, '3']));
  t.equal(loadConfig({ scope: 'worker', env: {}, flags }).values['worker.build.maxConcurrent'], 3);
});

t.test('describeConfig masks secrets and shows …File paths', async (t) => {
  const dir = t.testdir({ jwt: 'x' });
  const loaded = loadConfig({
    scope: 'server',
    env: {
      SERVICE_DATABASE_URL: 'postgres://kiln:hunter2@db/kiln?sslmode=require&password=hunter3',
      SERVICE_S3_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
      SERVICE_REDIS_URL: 'redis://:redispw@127.0.0.1:6379/0',
      SERVICE_ERROR_REPORT_DSN: 'https://abc123key@errors.example.org/4',
      SERVICE_METRICS_OTLP_ENDPOINT: 'https://u:otlppw@otlp.example.org',
    },
    overrides: { 'secrets.jwtFile': join(dir, 'jwt'), environmentVariables: { AWS_SECRET_ACCESS_KEY: 'shh', N: null } },
  });
  const rows = describeConfig(loaded);
  const value = (path: string) => rows.find((row) => row.path === path)?.value;
  t.equal(rows.length, optionPaths.length);
  t.equal(value('database.url'), 'postgres://kiln:****@db/kiln?sslmode=require&password=****');
  t.equal(value('s3.accessKeyId'), 'AKIA****');
  t.equal(value('redis.url'), 'redis://:****@127.0.0.1:6379/0');
  t.equal(value('errorReport.dsn'), 'https://****@errors.example.org/4');
  t.equal(value('metrics.otlp.endpoint'), 'https://u:****@otlp.example.org');
  t.same(value('environmentVariables'), { AWS_SECRET_ACCESS_KEY: '****', N: '****' });
  t.equal(value('secrets.jwtFile'), join(dir, 'jwt'));
  t.equal(value('port'), 3000);
  t.match(rows.find((row) => row.path === 'redis.url'), { extension: true, source: { kind: 'env', name: 'SERVICE_REDIS_URL' } });
  t.match(rows.find((row) => row.path === 'packages.server'), { extension: false, deployment: true });

  const text = renderConfig(rows);
  t.notMatch(text, /hunter2|hunter3|redispw|abc123key|otlppw|shh|IOSFODNN/);
  t.match(text, /^port {2,}3000 {2,}default$/m);
  t.match(text, /^redis\.url {2,}"redis:\/\/:\*\*\*\*@127\.0\.0\.1:6379\/0" {2,}SERVICE_REDIS_URL \(extension\)$/m);
  t.match(text, /^serveUrl {2,}"https:\/\/127\.0\.0\.1:3000" {2,}derived$/m);
});

t.test('maskValue leaves plain values and URLs without credentials alone', async (t) => {
  t.equal(maskValue('urlPassword', 'postgres://kiln@/kiln?host=/var/run/postgresql'), 'postgres://kiln@/kiln?host=/var/run/postgresql');
  t.equal(maskValue('partial', 'short'), '****');
  t.equal(maskValue('all', 'x'), '****');
  t.equal(maskValue('urlPassword', null), null);
});

t.test('checkConfigFile: no problems for a good file, every problem for a bad one', async (t) => {
  const dir = t.testdir();
  t.same(checkConfigFile(fixtureFile(dir, { localDb: { enable: true }, worker: { enable: true } }, 'good.json'), 'server'), []);
  const bad = fixtureFile(dir, { prot: 1, 'upload.concurrency': 0 }, 'bad.json');
  t.same(checkConfigFile(bad, 'server'), [
    `unknown option "prot" in ${bad}; did you mean "port"?`,
    `upload.concurrency=0 from ${bad}: must be an integer of 1 or more`,
  ]);
  const before = process.env.SERVICE_PORT;
  process.env.SERVICE_PORT = 'not a port';
  t.teardown(() => (before === undefined ? delete process.env.SERVICE_PORT : (process.env.SERVICE_PORT = before)));
  t.same(checkConfigFile(fixtureFile(dir, {}, 'empty.json'), 'worker'), [], 'the environment plays no part');
});

t.test('docs/configuration.md carries the current option table and names the extensions', async (t) => {
  const docs = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  t.ok(docs.includes(renderOptionTable()), 'regenerate with: npx tsx config/printOptionTable.ts --write docs/configuration.md');
  for (const path of optionPaths.filter((p) => p === 'redis.url' || p === 'localDb.port')) t.match(docs, `\`${path}\``);
});
