// tls.certFile / tls.keyFile (docs/http.md, "TLS"): kiln ends TLS itself in every serving thread,
// with real clients holding a test CA: curl on fresh connections (so every listener answers) and
// real Nix uploading and substituting through the threads. useTls keeps its meaning (https URLs);
// the port speaks no plain HTTP; a half-set or unreadable pair is refused naming the option.
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../../config/index.js';
import { checkedTlsFiles } from '../../../http/index.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { buildFixturePaths, tempDir } from '../../support/nixStore.js';
import { freshStore, netrcFile, nixOk } from '../../support/nixClient.js';
import { threadNodes, type ActorNode } from '../../support/servingThreads.js';

/** A CA and a certificate it signed for 127.0.0.1, as real deployments have (not a self-signed leaf). */
function testCertificates(): { ca: string; certFile: string; keyFile: string } {
  const dir = tempDir('kiln-tls-');
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '2', '-subj', '/CN=kiln test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(at('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at('server.pem'), '-days', '2', '-extfile', at('san.ext'));
  return { ca: at('ca.pem'), certFile: at('server.pem'), keyFile: at('server.key') };
}

interface CurlAnswer { status: number; body: string; exitCode: number }

/** One request by curl, a process and so a connection of its own. */
function curl(args: string[]): Promise<CurlAnswer> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '60', '-o', '-', '-w', '\n%{http_code}', ...args], (error, stdout) => {
      const cut = stdout.lastIndexOf('\n');
      resolve({ status: Number(stdout.slice(cut + 1)) || 0, body: stdout.slice(0, Math.max(cut, 0)), exitCode: error ? Number(error.code ?? 1) : 0 });
    });
  });
}

/** TestKiln['api'] over curl with the test CA: Node's fetch does not trust it. */
function curlApi(url: string, ca: string): TestKiln['api'] {
  return async (method, path, opts = {}) => {
    const args = ['--cacert', ca, '-X', method, '-H', 'content-type: application/json'];
    for (const [name, value] of Object.entries({ ...opts.headers, ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) })) args.push('-H', `${name}: ${value}`);
    if (opts.body !== undefined) args.push('--data-binary', typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body));
    const answer = await curl([...args, `${url}/api/v1${path}`]);
    const json = JSON.parse(answer.body) as { error?: boolean; message?: unknown; code?: string };
    return { status: answer.status, headers: new Headers(), message: json.message as never, error: json.error === true, ...(json.code ? { code: json.code } : {}) };
  };
}


const certificates = testCertificates();

t.test('a half-set or unusable pair is refused, naming the option', async (t) => {
  const refusal = (overrides: Record<string, string>): string => {
    try {
      loadConfig({ scope: 'server', env: {}, overrides });
      return 'loaded';
    } catch (e) {
      return e instanceof ConfigError ? e.message : String(e);
    }
  };
  t.match(refusal({ 'tls.certFile': certificates.certFile }), /tls\.keyFile=null .*must be set when tls\.certFile is set/);
  t.match(refusal({ 'tls.keyFile': certificates.keyFile }), /tls\.certFile=null .*must be set when tls\.keyFile is set/);
  t.throws(() => checkedTlsFiles(join(tempDir('kiln-tls-none-'), 'missing.pem'), certificates.keyFile), /tls\.certFile .*cannot be read/);
  t.throws(() => checkedTlsFiles(certificates.certFile, certificates.ca), /not a PEM certificate chain and its private key/, 'a certificate given as the key');
  t.same(checkedTlsFiles(certificates.certFile, certificates.keyFile), { certFile: certificates.certFile, keyFile: certificates.keyFile });
});

for (const threads of [2, 1]) {
  t.test(`http.threads ${threads}: TLS in every serving thread, real clients`, async (t) => {
    const started = await startTestKiln(t, { 'http.threads': threads, 'tls.certFile': certificates.certFile, 'tls.keyFile': certificates.keyFile, useTls: true });
    const kiln: TestKiln = Object.assign(Object.create(null) as object, started, { api: curlApi(started.url, certificates.ca) }) as TestKiln;
    t.match(kiln.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    t.ok(kiln.servingThreads, 'TLS runs serving threads even at http.threads 1');

    const config = await kiln.api<{ serve_url: string }>('GET', '/config');
    t.equal(config.status, 200);
    t.match(config.message.serve_url, /^https:/, 'useTls: the server\'s URL is https');

    const ada = await signUp(kiln, 'ada');
    const cache = await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
    const cacheInfo = `${kiln.url}/cache/pub/nix-cache-info`;
    const answers = await Promise.all(Array.from({ length: 24 }, () => curl(['--cacert', certificates.ca, cacheInfo])));
    t.same(new Set(answers.map((a) => a.status)), new Set([200]), 'every connection verified the certificate and was answered');
    const plain = await curl([cacheInfo.replace('https:', 'http:')]);
    t.not(plain.status, 200, 'no plain HTTP on the TLS port');
    const unverified = await curl([cacheInfo]);
    t.not(unverified.exitCode, 0, 'a client without the CA refuses the certificate');

    // Real Nix through the threads: uploads (relayed to the main thread), narinfos and NAR files.
    const fixtures = buildFixturePaths();
    const paths = [fixtures.file, fixtures.tree, fixtures.refs];
    const env = { NIX_SSL_CERT_FILE: certificates.ca };
    await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/pub`, ...paths], { netrc: netrcFile(ada.token), env });
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/pub`, '--to', freshStore(), '--option', 'trusted-public-keys', cache.publicKey, ...paths], { env });

    const actors = await kiln.api<ActorNode>('GET', '/admin/actors', { token: ada.token });
    const nodes = threadNodes(actors.message);
    t.equal(nodes.length, threads);
    for (const node of nodes) t.ok(Number(node.summary?.['requests'] ?? 0) > 0, `${node.id} answered over TLS (${node.summary?.['requests']} requests)`);
  });
}
