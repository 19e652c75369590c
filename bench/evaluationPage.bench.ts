// `npm run bench -- evaluation-page [builds=10000] [rounds=5]` (rounds per variant): the evaluation page's first
// meaningful paint with many builds, in Debian's Chromium against a kiln on loopback, from a
// Chromium performance trace: navigation start to the first build row in the DOM (a user-timing
// mark set by a MutationObserver) and to the largest contentful paint. Goal: ≤ 1 s for 10,000.
// The builds are written straight into the database (a completed evaluation with builds in every
// status); the page reads them as a person's browser would: GET /evals/{id} and the first page of
// GET /evals/{id}/builds/page (100 builds), the rest as they scroll into view. Printed beside it, what
// the server alone takes for that page (the page's floor) and for the whole list GET /evals/{id}/builds,
// which the page read before it was paged (the floor it had then). Two variants alternate: the route's
// index.html as kiln serves it (its script starts both reads while the HTML is parsed) and the same
// without that script (the reads start from the route's load, after the shell has booted).
import { chromium } from 'playwright-core';
import { startBenchKiln } from './benchKiln.js';

const count = Number(process.argv[2] ?? 10_000);
const rounds = Number(process.argv[3] ?? 5);
const CHROMIUM = process.env['KILN_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

interface Span { start: number; end: number }
interface TraceEvent { name: string; ts: number; cat: string; args?: { frame?: string; data?: { documentLoaderURL?: string; isLoadingMainFrame?: boolean } } }

const bench = await startBenchKiln({ 'projects.allowLocalRepositories': true });
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
try {
  const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${bench.kiln.url}/api/v1${path}`, {
      method, headers: { 'content-type': 'application/json', authorization: `Bearer ${bench.token}` }, body: body === undefined ? null : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { message: unknown }).message;
  };
  await api('PUT', '/orgs', { name: 'bench' });
  await api('PUT', '/projects/bench', { name: 'app', repository: 'file:///nonexistent' });
  const { sql } = bench;
  const [project] = await sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const [task] = await sql<{ id: string }[]>`select id from tasks where project_id = ${project!.id} and name = 'default'`;
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

  const url = `${bench.kiln.url}/evals/${evaluation!.id}`;
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
    const res = await fetch(`${bench.kiln.url}${path}`);
    return { body: await res.text(), headers: { 'content-type': res.headers.get('content-type')!, 'content-security-policy': res.headers.get('content-security-policy')! } };
  };
  const route = await htmlOf(`/evals/${evaluation!.id}`);
  const withoutEarlyReads = { ...route, body: route.body.replace(/<script src="\/_app\/immutable\/entry\/earlyReads\.[0-9a-f]+\.js"><\/script>\s*/, '') };
  if (withoutEarlyReads.body === route.body) throw new Error('the evaluation page has no early-reads script: is the frontend built?');
  const variants = { route, shell: withoutEarlyReads };
  type Variant = keyof typeof variants;
  const results: { variant: Variant; firstRowMs: number; lcpMs: number; fcpMs: number; waterfall: Record<string, Span | undefined> }[] = [];
  let skipped = 0;
  for (let round = 0; round <= 2 * rounds; round++) {
    const variant: Variant = round % 2 === 1 ? 'shell' : 'route';
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // A string, not a function: this file is compiled without the DOM's types.
    await context.addInitScript({
      content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(bench.token)});
        // The first build row (a read one, with its link): marked the moment it enters the DOM (the trace shows the mark).
        new MutationObserver((records, observer) => {
          if (document.querySelector('.vscroll [role="row"] a')) {
            performance.mark('kiln:first-build-row');
            observer.disconnect();
          }
        }).observe(document, { childList: true, subtree: true });`,
    });
    const page = await context.newPage();
    await page.route(url, (route) => route.fulfill({ status: 200, ...variants[variant] }));
    await browser.startTracing(page, { categories: ['devtools.timeline', 'loading', 'blink.user_timing', 'disabled-by-default-devtools.timeline'] });
    await page.goto(url);
    await page.locator('.vscroll [role="row"] a').first().waitFor();
    // Two frames after the row: its paint has happened and the LCP candidate is recorded.
    await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
    // Where the time went: when the page's HTML, the route's chunk and the two API reads started and
    // ended (navigation and resource timing, from the navigation's time origin).
    const resources = await page.evaluate(`[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].map((e) => ({ name: e.name, start: e.startTime, end: e.responseEnd }))`) as { name: string; start: number; end: number }[];
    const span = (test: (name: string) => boolean): Span | undefined => {
      const hits = resources.filter((r) => test(new URL(r.name).pathname));
      if (hits.length === 0) return undefined;
      return { start: Math.round(Math.min(...hits.map((h) => h.start))), end: Math.round(Math.max(...hits.map((h) => h.end))) };
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
    const navigation = events.find((e) => e.name === 'navigationStart' && e.args?.data?.documentLoaderURL === url)?.ts;
    const mark = events.find((e) => e.name === 'kiln:first-build-row');
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
    if (round > 0) results.push({ variant, firstRowMs: ms(mark.ts), lcpMs: ms(lcp), fcpMs: ms(fcp), waterfall });
  }
  const summary = (variant: Variant) => {
    const of = results.filter((r) => r.variant === variant);
    return {
      firstBuildRowMs: { median: median(of.map((r) => r.firstRowMs)), all: of.map((r) => r.firstRowMs) },
      largestContentfulPaintMs: { median: median(of.map((r) => r.lcpMs)), all: of.map((r) => r.lcpMs) },
      firstContentfulPaintMs: { median: median(of.map((r) => r.fcpMs)), all: of.map((r) => r.fcpMs) },
      // Medians of each span's start and end (ms after navigation).
      waterfallMs: Object.fromEntries(['html', 'routeChunk', 'evaluation', 'buildsPage'].map((key) => {
        const spans = of.flatMap((r) => (r.waterfall[key] ? [r.waterfall[key]] : []));
        return [key, { start: median(spans.map((x) => x.start)), end: median(spans.map((x) => x.end)) }];
      })),
    };
  };
  const now = summary('route');
  const before = summary('shell');
  const [load] = (await import('node:os')).loadavg();
  console.log(JSON.stringify({
    bench: 'evaluation-page', builds: count, rounds, skipped,
    earlyReads: now, withoutEarlyReads: before,
    firstRowRatio: Math.round((now.firstBuildRowMs.median / before.firstBuildRowMs.median) * 100) / 100,
    roundsOverGoal: { earlyReads: now.firstBuildRowMs.all.filter((ms) => ms > 1000).length, withoutEarlyReads: before.firstBuildRowMs.all.filter((ms) => ms > 1000).length },
    firstPageApiMs: { median: median(apiMs), all: apiMs },
    wholeListApiMs: { median: median(wholeListMs), all: wholeListMs },
    goalMs: 1000, loadAverage: load,
  }));
} finally {
  await browser.close();
  await bench.stop();
}
