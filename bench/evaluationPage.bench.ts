// `npm run bench -- evaluation-page [builds=10000] [rounds=5]` (rounds per variant): the evaluation page's first
// meaningful paint with many builds, in Debian's Chromium against a kiln on loopback, from a
// Chromium performance trace: navigation start to the first build row in the DOM (a user-timing
// mark set by a MutationObserver) and to the largest contentful paint. Goal: ≤ 1 s for 10,000.
// The builds are written straight into the database (a completed evaluation with builds in every
// status); the page reads them as a person's browser would: GET /evals/{id} and the first page of
// GET /evals/{id}/builds/page (100 builds), the rest as they scroll into view. Printed beside it, what
// the server alone takes for that page (the page's floor) and for the whole list GET /evals/{id}/builds,
// which the page read before it was paged (the floor it had then). Three variants alternate: the
// route's index.html as kiln serves it (one script starts both reads while the HTML is parsed, another
// draws the first rows from the answer before the shell has booted), the same without the early rows,
// and without either (the reads start from the route's load, after the shell has booted). Also
// reported: the mounted page's own first row, and where its main thread's time went until the first.
import { chromium } from 'playwright-core';
import { startBenchServer } from './evalDriver.js';
import { mainThreadTime, type MainThreadTime, type TraceEvent as ThreadEvent } from './mainThreadTime.js';

const count = Number(process.argv[2] ?? 10_000);
const rounds = Number(process.argv[3] ?? 5);
// Optional `<rtt ms>:<Mbit/s>` (e.g. 50:10): Chromium emulates that network for the page (loopback otherwise).
const network = process.argv[4]?.split(':').map(Number);
const CHROMIUM = process.env['KILN_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/** ms after navigation: fetch started, request sent (after any wait for a connection), first byte, last byte */
interface Span { start: number; request: number; response: number; end: number }
interface TraceEvent extends ThreadEvent { cat: string; args?: { frame?: string; data?: { documentLoaderURL?: string; isLoadingMainFrame?: boolean } } }

// kiln in a process of its own, as it runs in production: it does not share an event loop with
// Playwright (which receives the trace and hands the page its HTML).
const server = await startBenchServer({ localWorker: false });
const bench = { url: server.kiln.ready.url, token: server.kiln.ready.userToken, sql: server.sql };
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
try {
  const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${bench.url}/api/v1${path}`, {
      method, headers: { 'content-type': 'application/json', authorization: `Bearer ${bench.token}` }, body: body === undefined ? null : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { message: unknown }).message;
  };
  // kilnProcess.ts made the organization bench and its project app.
  const { sql } = bench;
  const [task] = await sql<{ id: string }[]>`select id from tasks where project_id = ${server.kiln.ready.projectId} and name = 'default'`;
  const [evaluation] = await sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase, commit, started_at, finished_at)
    values (${task!.id}, 'file:///nonexistent', 'packages.x86_64-linux.*', 'completed', ${'a'.repeat(40)}, now() - interval '5 minutes', now())
    returning id`;
  await sql`
    insert into derivations (drv_path, name, system, outputs)
    select '/nix/store/' || lpad(i::text, 32, '0') || '-pkg-' || i || '.drv', 'pkg-' || i, 'x86_64-linux',
      jsonb_build_object('out', '/nix/store/' || lpad((i + 10000000)::text, 32, '0') || '-pkg-' || i)
    from generate_series(1, ${count}) i`;
  await sql`
    insert into derivation_builds (derivation_id, status, failure_class, failure_reason, attempts, started_at, finished_at)
    select id, s.status, case when s.status = 'failed' then 'FailedPermanent' end, case when s.status = 'failed' then 'builder_failed' end,
      1, now() - interval '4 minutes', now() - interval '1 minute'
    from derivations cross join lateral (select (array['completed', 'completed', 'substituted', 'failed'])[1 + abs(hashtext(drv_path)) % 4] as status) s`;
  await sql`
    insert into builds (evaluation_id, derivation_build_id, entry_point, attr)
    select ${evaluation!.id}, db.id, d.name like '%0', case when d.name like '%0' then 'packages.x86_64-linux.' || d.name end
    from derivation_builds db join derivations d on d.id = db.derivation_id`;

  const url = `${bench.url}/evals/${evaluation!.id}`;
  // What the server alone takes for the list the page waits for (the page's floor), and for the whole list.
  const apiMs: number[] = [];
  const wholeListMs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    // Alternating which goes first: the second meets the caches the first warmed.
    const timed = async (path: string, into: number[]) => {
      const t0 = performance.now();
      await api('GET', path);
      into.push(Math.round(performance.now() - t0));
    };
    const first = () => timed(`/evals/${evaluation!.id}/builds/page?page=1&per_page=100`, apiMs);
    const whole = () => timed(`/evals/${evaluation!.id}/builds`, wholeListMs);
    if (i % 2 === 0) { await first(); await whole(); } else { await whole(); await first(); }
  }
  // The baseline in the same run: the route's own index.html without its early-reads script (what
  // kiln served before it: the API reads then started from the route's load, after the shell's boot)
  // against the route's own as kiln serves it now, in alternating rounds. Both are handed to the page
  // by the same interception, so neither pays for it alone.
  const htmlOf = async (path: string) => {
    const res = await fetch(`${bench.url}${path}`);
    return { body: await res.text(), headers: { 'content-type': res.headers.get('content-type')!, 'content-security-policy': res.headers.get('content-security-policy')! } };
  };
  const route = await htmlOf(`/evals/${evaluation!.id}`);
  const earlyScript = (name: string) => new RegExp(`<script src="/_app/immutable/entry/${name}\\.[0-9a-f]+\\.js"( defer)?></script>\\s*`);
  const earlyReadsOnly = { ...route, body: route.body.replace(earlyScript('earlyRows'), '') };
  const withoutEarlyScripts = { ...earlyReadsOnly, body: earlyReadsOnly.body.replace(earlyScript('earlyReads'), '') };
  if (earlyReadsOnly.body === route.body || withoutEarlyScripts.body === earlyReadsOnly.body) throw new Error('the evaluation page lacks its early scripts: is the frontend built?');
  // route: as kiln serves it (early reads and early rows); earlyReadsOnly: what kiln served before the
  // early rows; shell: before the early reads too (the reads start from the route's load).
  const variants = { route, earlyReadsOnly, shell: withoutEarlyScripts };
  type Variant = keyof typeof variants;
  const results: { variant: Variant; firstRowMs: number; pageRowMs: number; lcpMs: number; fcpMs: number; waterfall: Record<string, Span | undefined>; mainThread: MainThreadTime }[] = [];
  let skipped = 0;
  const order: Variant[] = ['route', 'earlyReadsOnly', 'shell'];
  for (let round = 0; round <= order.length * rounds; round++) {
    const variant: Variant = order[round % order.length]!;
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // A string, not a function: this file is compiled without the DOM's types.
    await context.addInitScript({
      content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(bench.token)});
        // The first build row (a read one, with its link): marked the moment it enters the DOM (the trace shows the mark).
        // The early rows count (they are build rows with their links); the mounted page's own first row
        // (inside main#content) is marked too: from then on the page is the app, filters and all.
        new MutationObserver((records, observer) => {
          if (!performance.getEntriesByName('kiln:first-build-row').length && document.querySelector('.vscroll [role="row"] a')) performance.mark('kiln:first-build-row');
          if (document.querySelector('#content .vscroll [role="row"] a')) {
            performance.mark('kiln:page-build-row');
            observer.disconnect();
          }
        }).observe(document, { childList: true, subtree: true });`,
    });
    const page = await context.newPage();
    if (network) {
      const cdp = await context.newCDPSession(page);
      const bytesPerSecond = (network[1]! * 1_000_000) / 8;
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: network[0]!, downloadThroughput: bytesPerSecond, uploadThroughput: bytesPerSecond });
    }
    // Only the page's HTML is intercepted (times: 1): Playwright then turns interception off, so the
    // shell's files and the API reads go straight to kiln.
    await page.route(url, (route) => route.fulfill({ status: 200, ...variants[variant] }), { times: 1 });
    await browser.startTracing(page, { categories: ['devtools.timeline', 'loading', 'blink.user_timing', 'disabled-by-default-devtools.timeline', 'v8', 'v8.execute'] });
    await page.goto(url);
    await page.locator('#content .vscroll [role="row"] a').first().waitFor();
    // Two frames after the row: its paint has happened and the LCP candidate is recorded.
    await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
    // Where the time went: when the page's HTML, the route's chunk and the two API reads started and
    // ended (navigation and resource timing, from the navigation's time origin).
    const resources = await page.evaluate(`[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].map((e) => ({ name: e.name, start: e.startTime, request: e.requestStart, response: e.responseStart, end: e.responseEnd }))`) as ({ name: string } & Span)[];
    const span = (test: (name: string) => boolean): Span | undefined => {
      const hits = resources.filter((r) => test(new URL(r.name).pathname));
      if (hits.length === 0) return undefined;
      const last = hits.reduce((a, b) => (b.end > a.end ? b : a));
      return { start: Math.round(Math.min(...hits.map((h) => h.start))), request: Math.round(last.request), response: Math.round(last.response), end: Math.round(last.end) };
    };
    const waterfall = {
      html: span((p) => p === `/evals/${evaluation!.id}`),
      routeChunk: span((p) => /\/nodes\/(?!0\.)/.test(p)),
      evaluation: span((p) => p === `/api/v1/evals/${evaluation!.id}`),
      buildsPage: span((p) => p === `/api/v1/evals/${evaluation!.id}/builds/page`),
    };
    const trace = JSON.parse((await browser.stopTracing()).toString('utf8')) as { traceEvents: TraceEvent[] };
    await context.close();
    const events = trace.traceEvents;
    // The navigation to the page itself (not about:blank's).
    const navigationEvent = events.find((e) => e.name === 'navigationStart' && e.args?.data?.documentLoaderURL === url);
    const navigation = navigationEvent?.ts;
    const mark = events.find((e) => e.name === 'kiln:first-build-row');
    const pageMark = events.find((e) => e.name === 'kiln:page-build-row');
    const after = (name: string) => events.filter((e) => e.name === name && e.ts >= navigation!).map((e) => e.ts).sort((a, b) => a - b);
    const lcp = after('largestContentfulPaint::Candidate').at(-1);
    const fcp = after('firstContentfulPaint')[0];
    // A trace that lost its events (Chromium drops some under heavy load) is counted, not used.
    if (navigation === undefined || !mark) {
      skipped++;
      continue;
    }
    const ms = (ts: number | undefined) => (ts === undefined ? NaN : Math.round((ts - navigation) / 100) / 10);
    // Round 0 warms kiln's caches and Chromium's code cache; it is not counted.
    // What the page's main thread did until the first row (navigationStart is emitted on it).
    const mainThread = mainThreadTime(events, navigationEvent!.pid, navigationEvent!.tid, navigation, mark.ts);
    if (round > 0) results.push({ variant, firstRowMs: ms(mark.ts), pageRowMs: ms(pageMark?.ts), lcpMs: ms(lcp), fcpMs: ms(fcp), waterfall, mainThread });
  }
  const summary = (variant: Variant) => {
    const of = results.filter((r) => r.variant === variant);
    return {
      firstBuildRowMs: { median: median(of.map((r) => r.firstRowMs)), all: of.map((r) => r.firstRowMs) },
      // the mounted page's own first row (the same as the first for variants without early rows)
      pageBuildRowMs: { median: median(of.map((r) => r.pageRowMs)), all: of.map((r) => r.pageRowMs) },
      largestContentfulPaintMs: { median: median(of.map((r) => r.lcpMs)), all: of.map((r) => r.lcpMs) },
      firstContentfulPaintMs: { median: median(of.map((r) => r.fcpMs)), all: of.map((r) => r.fcpMs) },
      // Medians of each span's start and end (ms after navigation).
      waterfallMs: Object.fromEntries(['html', 'routeChunk', 'evaluation', 'buildsPage'].map((key) => {
        const spans = of.flatMap((r) => (r.waterfall[key] ? [r.waterfall[key]] : []));
        return [key, { start: median(spans.map((x) => x.start)), request: median(spans.map((x) => x.request)), response: median(spans.map((x) => x.response)), end: median(spans.map((x) => x.end)) }];
      })),
      // Medians over the rounds of the main thread's time until the first row, and of the names that took the most of it.
      mainThreadMs: {
        busy: median(of.map((r) => r.mainThread.busyMs)), cpu: median(of.map((r) => r.mainThread.cpuMs)), idle: median(of.map((r) => r.mainThread.idleMs)),
        byName: Object.fromEntries([...new Set(of.flatMap((r) => Object.keys(r.mainThread.byName)))]
          .map((name) => [name, median(of.map((r) => r.mainThread.byName[name] ?? 0))] as const)
          .filter(([, ms]) => ms >= 5).sort((a, b) => b[1] - a[1])),
      },
    };
  };
  const now = summary('route');
  const readsOnly = summary('earlyReadsOnly');
  const before = summary('shell');
  const [load] = (await import('node:os')).loadavg();
  const over = (s: typeof now) => s.firstBuildRowMs.all.filter((ms) => ms > 1000).length;
  console.log(JSON.stringify({
    bench: 'evaluation-page', builds: count, rounds, skipped, network: network ? { rttMs: network[0], mbit: network[1] } : 'loopback',
    earlyRows: now, earlyReadsOnly: readsOnly, withoutEarlyScripts: before,
    firstRowRatio: {
      earlyRowsToReadsOnly: Math.round((now.firstBuildRowMs.median / readsOnly.firstBuildRowMs.median) * 100) / 100,
      earlyRowsToNone: Math.round((now.firstBuildRowMs.median / before.firstBuildRowMs.median) * 100) / 100,
    },
    roundsOverGoal: { earlyRows: over(now), earlyReadsOnly: over(readsOnly), withoutEarlyScripts: over(before) },
    firstPageApiMs: { median: median(apiMs), all: apiMs },
    wholeListApiMs: { median: median(wholeListMs), all: wholeListMs },
    goalMs: 1000, loadAverage: load,
  }));
} finally {
  await browser.close();
  await server.stop();
}
