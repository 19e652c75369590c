// The web UI as kiln's HTTP layer serves it: CSP on every UI response, no inline script, the
// precompressed variants, immutable hashed assets, index.html only where no API path is.
import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../../config/index.js';
import { RouteTable, startHttpServer } from '../../../http/index.js';
import { frontendRoutes } from '../../../http/frontend/frontendRoutes.js';
import { loadFrontendBuild } from '../../../http/frontend/frontendBuild.js';
import { startTestKiln } from '../../support/kiln.js';
import { builtFrontend } from '../../support/browser.js';

t.test('served from memory by kiln serve', async (t) => {
  builtFrontend();
  const kiln = await startTestKiln(t);
  const get = (path: string, headers: Record<string, string> = {}) => fetch(kiln.url + path, { headers, redirect: 'manual' });

  t.test('index.html at / and at any page path, with the strict CSP and no inline script', async (t) => {
    for (const path of ['/', '/login', '/projects/acme/web']) {
      const res = await get(path);
      t.equal(res.status, 200, path);
      t.match(res.headers.get('content-type'), /^text\/html/);
      const csp = res.headers.get('content-security-policy') ?? '';
      t.match(csp, /(^|; )script-src 'self'(;|$)/, `${path}: script-src 'self' only`);
      t.match(csp, /frame-ancestors 'none'/);
      t.notMatch(csp, /unsafe-eval/);
      t.equal(res.headers.get('cache-control'), 'no-cache');
      const html = await res.text();
      t.notMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, 'every <script> has a src');
      t.match(html, /<script src="\/_app\/immutable\/entry\/boot\.[0-9a-f]+\.js"><\/script>/);
    }
  });

  t.test('hashed assets are immutable and precompressed; the smallest accepted encoding is sent', async (t) => {
    const html = await (await get('/')).text();
    const script = /src="(\/_app\/immutable\/[^"]+\.js)"/.exec(html)?.[1];
    t.ok(script, 'the boot script is named in index.html');
    const plain = await get(script!, { 'accept-encoding': 'identity' });
    t.equal(plain.status, 200);
    t.equal(plain.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    t.equal(plain.headers.get('content-encoding'), null);
    t.match(plain.headers.get('content-security-policy'), /script-src 'self'/);
    t.match(await plain.text(), /import\("\/_app\/immutable\/entry\/start\.[^"]+\.js"\)/, 'the boot script imports the start chunk');
    // The largest script: a tiny one is sent as it is (no variant is smaller).
    const build = loadFrontendBuild();
    if (!build.ok) throw new Error(build.problem);
    const start = [...build.files].filter(([p]) => p.endsWith('.js')).sort(([, a], [, b]) => b.body.length - a.body.length)[0]?.[0];
    for (const encoding of ['gzip', 'br', 'zstd']) {
      const res = await get(start!, { 'accept-encoding': encoding });
      t.equal(res.headers.get('content-encoding'), encoding, `${encoding} when it is the only one accepted`);
      t.equal(res.headers.get('vary'), 'Accept-Encoding');
    }
    const raw = await fetch(kiln.url + start!, { headers: { 'accept-encoding': 'gzip;q=0, br' } });
    t.equal(raw.headers.get('content-encoding'), 'br', 'q=0 refuses an encoding');
  });

  t.test("a page path's index.html preloads that route's own chunks; other paths get the shell's", async (t) => {
    const modulePreloads = (html: string) => new Set([...html.matchAll(/<link href="([^"]+)" rel="modulepreload">/g)].map((m) => m[1]!));
    const shell = modulePreloads(await (await get('/no/such/page/here')).text());
    const evaluation = await (await get('/evals/00000000-0000-0000-0000-000000000000')).text();
    const own = [...modulePreloads(evaluation)].filter((f) => !shell.has(f));
    t.ok(own.some((f) => /^\/_app\/immutable\/nodes\/\d+\.[\w-]+\.js$/.test(f)), 'the route node is preloaded');
    // The evaluation page has no styles of its own (its table's are app.css's, for the early rows): the build page's.
    const build = await (await get('/builds/00000000-0000-0000-0000-000000000000')).text();
    t.match(build, /<link href="\/_app\/immutable\/assets\/[^"]+\.css" rel="preload" as="style">/, 'and a route\'s styles, without blocking paint');
    t.notMatch(evaluation, /<script(?![^>]*\ssrc=)[^>]*>/, 'still no inline script');
    const trailing = modulePreloads(await (await get('/evals/00000000-0000-0000-0000-000000000000/')).text());
    t.same([...trailing].filter((f) => !shell.has(f)), own, 'a trailing slash is the same page');
    t.notSame([...modulePreloads(build)].filter((f) => !shell.has(f)), own, 'another route, other chunks');
    const newOrg = [...modulePreloads(await (await get('/new/org')).text())].filter((f) => !shell.has(f));
    const newProject = [...modulePreloads(await (await get('/new/project')).text())].filter((f) => !shell.has(f));
    t.ok(newOrg.length > 0 && newProject.length > 0);
    t.notSame(newOrg, newProject, 'literal segments tell routes apart');
    const encoded = await get('/evals/x', { 'accept-encoding': 'br' });
    t.equal(encoded.headers.get('content-encoding'), 'br', 'precompressed like the shell');
    t.match(encoded.headers.get('content-security-policy'), /script-src 'self'/);
    t.equal((await get('/_app/routes/routes.json')).status, 404, 'the route table is not served');
    t.equal((await get('/_app/routes/3.html')).status, 404, 'nor the per-route files by their own path');
  });

  t.test('an unchanged file is a 304 to a matching If-None-Match', async (t) => {
    const first = await get('/favicon.svg');
    const etag = first.headers.get('etag');
    t.ok(etag);
    const again = await get('/favicon.svg', { 'if-none-match': etag! });
    t.equal(again.status, 304);
  });

  t.test('the fallback never shadows the API, the binary cache or a missing asset', async (t) => {
    for (const path of ['/api/v1/no-such-thing', '/api/other', '/cache/nope/nix-cache-info', '/proto', '/_app/immutable/entry/missing.js', '/scim/v2/nothing']) {
      const res = await get(path);
      t.equal(res.status, 404, path);
      t.notMatch(res.headers.get('content-type') ?? '', /text\/html/, `${path} is not the UI`);
    }
    const res = await kiln.api('GET', '/no-such-thing');
    t.equal(res.code, 'not_found');
    const post = await fetch(kiln.url + '/somewhere', { method: 'POST' });
    t.equal(post.status, 404, 'only GET and HEAD get the UI');
  });
});

t.test('frontend.enable=false serves none of it', async (t) => {
  builtFrontend();
  const kiln = await startTestKiln(t, { 'frontend.enable': false });
  for (const path of ['/', '/login', '/favicon.svg']) {
    const res = await fetch(kiln.url + path);
    t.equal(res.status, 404, path);
    t.match(res.headers.get('content-type'), /application\/json/);
    t.equal(res.headers.get('content-security-policy'), null);
  }
  const assets = loadFrontendBuild();
  t.ok(assets.ok);
  if (assets.ok) {
    const someAsset = [...assets.files.keys()].find((p) => p.startsWith('/_app/immutable/'));
    t.equal((await fetch(kiln.url + someAsset!)).status, 404, 'no asset either');
  }
});

t.test('a missing build does not stop the server: a notice, and a plain page on UI paths', async (t) => {
  const empty = await mkdtemp(join(tmpdir(), 'kiln-no-frontend-'));
  t.teardown(() => rm(empty, { recursive: true, force: true }));
  const config = loadConfig({ scope: 'server', env: {}, overrides: {} }).values;
  const table = new RouteTable<null>();
  const build = frontendRoutes(table, config, { dir: empty });
  t.equal(build?.ok, false);
  t.match(table.notices[0], /not built/);
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const server = await startHttpServer<null>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log, routes: table, anonymous: null,
    authenticate: async () => null,
  });
  t.teardown(() => server.close(0));
  t.ok(lines.some((l) => /not built/.test(l) && /"level":40/.test(l)), 'the operator is told at start');
  const page = await fetch(`http://127.0.0.1:${server.port}/login`);
  t.equal(page.status, 404);
  t.match(page.headers.get('content-type'), /text\/html/);
  t.match(page.headers.get('content-security-policy'), /script-src 'self'/);
  t.match(await page.text(), /npm run build:frontend/);
  const api = await fetch(`http://127.0.0.1:${server.port}/api/v1/health`);
  t.match(api.headers.get('content-type'), /application\/json/, 'API paths stay JSON');
});
