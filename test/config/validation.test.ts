// Bad input: every problem at once, each naming option, value, source and what was expected.
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig, readSecretFile, type LoadOptions } from '../../config/index.js';
import { fixtureFile } from './fixtureFile.js';

const load = (options: Partial<LoadOptions> = {}) => loadConfig({ scope: 'server', env: {}, ...options });

/** The problems a load reports; fails the test if it loads. */
function problemsOf(options: Partial<LoadOptions>): readonly string[] {
  try {
    load(options);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

t.test('out of bounds, in the exact format', async (t) => {
  t.throws(() => load({ env: { SERVICE_NAR_CHUNK_BYTES: '100' } }), {
    name: 'ConfigError',
    message: 'nar.chunkBytes=100 from SERVICE_NAR_CHUNK_BYTES: must be an integer from 4096 to 4194304',
  });
  t.same(problemsOf({ overrides: { 'upload.concurrency': 0 } }), ['upload.concurrency=0 from override: must be an integer of 1 or more']);
  t.same(problemsOf({ flags: { port: '70000' } }), ['port=70000 from --port: must be a port number from 0 to 65535']);
  t.same(problemsOf({ overrides: { 'worker.build.oomScoreAdjust': -1001 } }), ['worker.build.oomScoreAdjust=-1001 from override: must be null or an integer from -1000 to 1000']);
});

t.test('wrong types from each source', async (t) => {
  const file = fixtureFile(t.testdir(), { port: '80', useTls: 'yes', 'oidc.scopes': 'openid', 'http.localIps': ['10.0.0.0/33'] });
  t.same(problemsOf({ file }), [
    `port="80" from ${file}: must be a port number from 0 to 65535`,
    `useTls="yes" from ${file}: must be true or false`,
    `http.localIps=["10.0.0.0/33"] from ${file}: must be a list of CIDR ranges such as 10.0.0.0/8 (comma-separated or a JSON array)`,
    `oidc.scopes="openid" from ${file}: must be a list of strings (comma-separated or a JSON array)`,
  ]);
  t.same(problemsOf({ env: { SERVICE_USE_TLS: 'maybe', SERVICE_RETENTION_DAYS: '1.5', SERVICE_LOG_LEVEL_WEB: 'loud' } }), [
    'retentionDays=1.5 from SERVICE_RETENTION_DAYS: must be an integer of 0 or more',
    'useTls=maybe from SERVICE_USE_TLS: must be true or false',
    'log.level.web=loud from SERVICE_LOG_LEVEL_WEB: must be null or one of trace, debug, info, warn, error',
  ]);
  t.same(problemsOf({ flags: { 'upload.bytesBudget': true, 'environmentVariables': '{oops' } }), [
    'environmentVariables=**** from --environment-variables: must be a JSON object whose values are null, booleans, integers or strings',
    'upload.bytesBudget=true from --upload-bytes-budget: must be an integer of 1 or more',
  ]);
  t.same(problemsOf({ env: { SERVICE_LISTEN_ADDR: '', SERVICE_DATABASE_URL: 'mysql://kiln:hunter2@db/kiln', SERVICE_WORKER_SERVER_URL: 'http://x/proto' } }), [
    'listenAddr="" from SERVICE_LISTEN_ADDR: must be an IP address',
    'database.url=mysql://kiln:****@db/kiln from SERVICE_DATABASE_URL: must be a URL starting with postgres:// or postgresql://',
    'worker.serverUrl=http://x/proto from SERVICE_WORKER_SERVER_URL: must be null or a URL starting with ws:// or wss://',
  ], 'a secret is masked even in an error');
});

t.test('all problems are listed, one per line', async (t) => {
  const error = t.throws(() => load({ env: { SERVICE_PORT: 'x', SERVICE_USE_TLS: 'x' } })) as ConfigError;
  t.equal(error.message.split('\n').length, 2);
  t.same(error.message.split('\n'), error.problems);
});

t.test('unknown keys in the file are named, with the closest option', async (t) => {
  const file = fixtureFile(t.testdir(), { 'upload.byteBudget': 1, upload: { concurency: 2 }, bytesBudget: 3, zzzzzz: 4, log: 5 });
  t.same(problemsOf({ file }), [
    `unknown option "upload.byteBudget" in ${file}; did you mean "upload.bytesBudget"?`,
    `unknown option "upload.concurency" in ${file}; did you mean "upload.concurrency"?`,
    `unknown option "bytesBudget" in ${file}; did you mean "upload.bytesBudget"?`,
    `unknown option "zzzzzz" in ${file}`,
    `"log" in ${file} must be an object of log.* options`,
  ]);
});

t.test('a key set twice in the file', async (t) => {
  const file = fixtureFile(t.testdir(), { 'upload.concurrency': 1, upload: { concurrency: 2 } });
  t.same(problemsOf({ file }), [`upload.concurrency is set twice in ${file}`]);
});

t.test('a malformed file says where', async (t) => {
  const file = fixtureFile(t.testdir(), '{\n  "port": 3000,\n  "useTls" false\n}\n');
  t.same(problemsOf({ file }), [`${file}:3:12: not valid JSON: Expected ':' after property name`]);
  const array = fixtureFile(t.testdir(), '[1]');
  t.same(problemsOf({ file: array }), [`${array}: must hold a JSON object of options`]);
  const missing = join(t.testdir(), 'nope.json');
  t.match(problemsOf({ file: missing }), [new RegExp(`^cannot read config file ${missing}: ENOENT`)]);
});

t.test('file problems and value problems come together', async (t) => {
  const file = fixtureFile(t.testdir(), { prot: 1 });
  t.same(problemsOf({ file, env: { SERVICE_PORT: 'x' } }), [
    `unknown option "prot" in ${file}; did you mean "port"?`,
    'port=x from SERVICE_PORT: must be a port number from 0 to 65535',
  ]);
});

t.test('flags belong to their command; unknown paths are named', async (t) => {
  t.same(problemsOf({ flags: { 'worker.port': '1', 'upload.bytesBudgt': '1' } }), [
    'worker.port is not a flag of kiln serve; it is --port of kiln worker',
    'unknown option "upload.bytesBudgt" given as a flag; did you mean "upload.bytesBudget"?',
  ]);
  t.throws(() => loadConfig({ scope: 'worker', env: {}, flags: { port: '1' } }), { message: 'port is not a flag of kiln worker; it is --port of kiln serve' });
  t.same(problemsOf({ overrides: { nope: 1 } as Record<string, unknown> }), ['unknown option "nope" given as an override']);
});

t.test('a …File option must name a readable file', async (t) => {
  const dir = t.testdir({ jwt: 'secret\n' });
  const missing = join(dir, 'missing');
  t.same(problemsOf({ overrides: { 'secrets.jwtFile': missing } }), [
    `secrets.jwtFile="${missing}" from override: must be a readable file (ENOENT: no such file or directory, open '${missing}')`,
  ]);
  t.equal(load({ overrides: { 'secrets.jwtFile': join(dir, 'jwt') } }).values['secrets.jwtFile'], join(dir, 'jwt'));
  // The worker does not read the server's secrets, nor the server the worker's.
  t.equal(loadConfig({ scope: 'worker', env: {}, overrides: { 'secrets.jwtFile': missing } }).values['secrets.jwtFile'], missing);
  t.equal(load({ overrides: { 'worker.peersFile': missing } }).values['worker.peersFile'], missing);
  t.throws(() => loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.peersFile': missing } }), /worker\.peersFile=.* must be a readable file/);
});

t.test('readSecretFile trims, and fails clearly', async (t) => {
  const dir = t.testdir({ token: '  s3cr3t \n', empty: '\n' });
  t.equal(readSecretFile(join(dir, 'token')), 's3cr3t');
  t.throws(() => readSecretFile(join(dir, 'empty')), { name: 'ConfigError', message: `secret file ${join(dir, 'empty')} is empty` });
  t.throws(() => readSecretFile(join(dir, 'none')), { message: new RegExp(`^cannot read secret file ${join(dir, 'none')}: ENOENT`) });
});

t.test('a directory is not a readable secret file', async (t) => {
  const dir = t.testdir({ sub: {} });
  t.match(problemsOf({ overrides: { 'scim.tokenFile': join(dir, 'sub') } }), [/scim\.tokenFile=.* must be a readable file \(EISDIR/]);
});

t.test('an enabled feature needs its settings', async (t) => {
  t.same(problemsOf({ overrides: { 's3.enable': true } }), ['s3.bucket="" from default: must be set when s3.enable is true']);
  t.same(problemsOf({ overrides: { 'oidc.required': true } }), ['oidc.enable=false from default: must be true when oidc.required is true']);
  t.same(problemsOf({ env: { SERVICE_DATABASE_MIN_CONNECTIONS: '20' } }), ['database.minConnections=20 from SERVICE_DATABASE_MIN_CONNECTIONS: must be at most database.maxConnections (16)']);
  t.same(problemsOf({ overrides: { 'gitHostApp.enable': true } }), [
    'gitHostApp.id=null from default: must be set when gitHostApp.enable is true',
    'gitHostApp.privateKeyFile=null from default: must be set when gitHostApp.enable is true',
    'gitHostApp.webhookSecretFile=null from default: must be set when gitHostApp.enable is true',
  ]);
  const app = { 'gitHostApp.enable': true, 'gitHostApp.id': 1, 'gitHostApp.privateKeyFile': import.meta.filename, 'gitHostApp.webhookSecretFile': import.meta.filename };
  t.doesNotThrow(() => load({ overrides: app }), 'the default API: https://api.github.com');
  for (const apiUrl of ['https://user:pw@git.example/api/v1', 'https://git.example/api?x=1', 'https://git.example/api#f']) {
    t.match(problemsOf({ overrides: { ...app, 'gitHostApp.apiUrl': apiUrl } }), [/^gitHostApp\.apiUrl=.*must be an http\(s\) URL without user, password, query or fragment$/], apiUrl);
  }
  t.same(problemsOf({ overrides: { ...app, 'gitHostApp.apiUrl': 'ftp://git.example' } }).length, 1, 'not http(s)');
  // the installation token travels to the clone URL too
  for (const cloneUrl of ['https://x-access-token:t@git.example', 'https://git.example/?x=1', 'https://git.example/#f']) {
    t.match(problemsOf({ overrides: { ...app, 'gitHostApp.cloneUrl': cloneUrl } }), [/^gitHostApp\.cloneUrl=.*must be an http\(s\) URL without user, password, query or fragment$/], cloneUrl);
  }
  t.doesNotThrow(() => load({ overrides: { ...app, 'gitHostApp.cloneUrl': 'https://git.example/forgejo' } }), 'a base with a path');
  t.doesNotThrow(() => load({ overrides: { 'gitHostApp.cloneUrl': 'https://u:p@git.example' } }), 'not checked while the application is off');
  t.throws(() => loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.capabilities.federate': true } }), {
    message: /worker\.discoverable=false from default: must be true when worker\.capabilities\.federate is true \(federation needs incoming connections\)/,
  });
  t.doesNotThrow(() => load({ overrides: { 'worker.capabilities.federate': true } }), 'worker rules are checked by the worker');
});

t.test('useQuic needs an https:// serveUrl: HTTP/3 runs over TLS only', async (t) => {
  t.same(problemsOf({ overrides: { useQuic: true, useTls: false } }), [
    'useQuic=true from override: must be false while serveUrl is not https:// (HTTP/3 runs over TLS only)',
  ]);
  t.doesNotThrow(() => load({ overrides: { useQuic: true, serveUrl: 'https://kiln.example' } }));
  t.doesNotThrow(() => load({ overrides: { useQuic: true, useTls: true } }), 'the derived serveUrl is https:// with useTls');
});

t.test('federation is refused when turned on, not ignored', async (t) => {
  t.same(problemsOf({ overrides: { 'proto.federate': true } }), [
    'proto.federate=true from override: must be false: federation between servers over /proto is not available in this version of kiln (docs/proto.md, "Federation")',
  ]);
  t.throws(() => loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.capabilities.federate': true, 'worker.discoverable': true } }), {
    message: /worker\.capabilities\.federate=true from override: must be false: forwarding work and NARs between workers and servers is not available/,
  });
  t.doesNotThrow(() => load({ overrides: { 'proto.federate': false } }), 'off is the default and fine');
});

t.test('a value that fails its own check is not reported again by a rule', async (t) => {
  t.same(problemsOf({ overrides: { 's3.enable': true, 's3.bucket': 5 } }), ['s3.bucket=5 from override: must be a string']);
});
