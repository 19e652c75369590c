// `npm run bench -- live-log-tail [mib=10] [rounds=3] [MiB/s=1]`: the build page in Debian's Chromium while a
// running build streams its log live: `mib` MiB at 1 MiB/s, sent by a simulated worker as /proto
// buildLog chunks of 64 KiB every 62.5 ms (a higher rate: as a finished build's stored log
// arrives, all at once; kiln in a process of its own, so the page gets the
// bytes the moment kiln receives them, through POST /builds/{id}/log). Measured in the page with a
// PerformanceObserver of type longtask: the main thread's tasks over 50 ms from the first chunk
// until the log's last line is drawn. Goal: none (every task under 50 ms).
// Baseline in the same run, in alternating rounds: the same page of another running build for
// the same time with no log arriving, so the long tasks the machine causes on its own are seen.
// Wall time alone says little on a loaded machine (at load 24 on 2 cores a thread gets about a
// twelfth of a core, so a 5 ms task lasts 60 ms), so a Chromium trace of the same span also gives
// each main-thread task's thread CPU time (`tdur`): the tasks over 50 ms of CPU, the longest, and
// the main thread's CPU time in all, which do not depend on what else the machine runs.
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadAverage } from './childServer.js';
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { syntheticGraph } from './syntheticGraph.js';

const mib = Number(process.argv[2] ?? 10);
const rounds = Number(process.argv[3] ?? 3);
const CHUNK = 64 * 1024;
const rateMiBs = Number(process.argv[4] ?? 1);
const CHUNK_EVERY_MS = 62.5 / rateMiBs; // 16 chunks a second: 1 MiB/s
const CHROMIUM = process.env['KILN_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A compiler-like log with a coloured word on every fourth line, ending with a line the page waits for. */
function logText(bytes: number, end: string): Buffer {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes - end.length - 1; i++) {
    const line = `[${(i / 100).toFixed(2).padStart(9)}] cc -O2 -c src/module-${String(i % 5000).padStart(5, '0')}.c -o build/module-${i}.o${i % 4 === 0 ? ' \x1b[32mok\x1b[0m' : ''}`;
    lines.push(line);
    size += line.length + 1;
  }
  lines.push(end);
  return Buffer.from(`${lines.join('\n')}\n`);
}

interface Round {
  longTasks: number; maxLongTaskMs: number; blockingMs: number; seconds: number;
  /** from the trace: main-thread tasks of ≥ 50 ms thread CPU time, the longest, and the sum */
  cpuLongTasks: number; maxTaskCpuMs: number; mainThreadCpuMs: number;
}

type CpuFigures = Pick<Round, 'cpuLongTasks' | 'maxTaskCpuMs' | 'mainThreadCpuMs'>;

interface TraceEvent { name: string; ph: string; pid: number; tid: number; dur?: number; tdur?: number; args?: { name?: string; data?: { frames?: { processId?: number }[] } } }

/** Traces `page`'s renderer until the returned stop(), which gives its main thread's tasks' CPU times. */
async function traceMainThread(browser: Browser, page: Page): Promise<{ stop(): Promise<CpuFigures> }> {
  await browser.startTracing(page, { categories: ['disabled-by-default-devtools.timeline', '__metadata'] });
  return {
    async stop() {
      const events = (JSON.parse((await browser.stopTracing()).toString('utf8')) as { traceEvents: TraceEvent[] }).traceEvents;
      const pid = events.find((e) => e.name === 'TracingStartedInBrowser')?.args?.data?.frames?.[0]?.processId;
      const main = events.find((e) => e.name === 'thread_name' && e.pid === pid && e.args?.name === 'CrRendererMain');
      if (!main) throw new Error('the trace does not name the page\'s renderer main thread');
      const cpu = events.filter((e) => e.name === 'RunTask' && e.ph === 'X' && e.pid === main.pid && e.tid === main.tid).map((e) => (e.tdur ?? 0) / 1000);
      return {
        cpuLongTasks: cpu.filter((ms) => ms >= 50).length,
        maxTaskCpuMs: Math.round(Math.max(0, ...cpu)),
        mainThreadCpuMs: Math.round(cpu.reduce((a, b) => a + b, 0)),
      };
    },
  };
}

const server = await startBenchServer();
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
try {
  // A graph of independent derivations: every one is dispatched at once, one running build per round and side.
  const size = 2 * rounds + 1;
  const evaluator = await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
  const builder = await connectSimWorker(server.protoUrl, { capabilities: { eval: false, build: true }, maxConcurrentBuilds: size });
  const jobs: { jobId: string; drvPath: string }[] = [];
  builder.onMessage((m) => {
    if (m.t !== 'buildJob') return;
    builder.send({ t: 'jobAccepted', jobId: m.jobId });
    jobs.push({ jobId: m.jobId, drvPath: m.drvPath });
  });
  await recordGraph(server, evaluator, syntheticGraph(size, { width: size, seed: `live-log-${Date.now()}` }));
  while (jobs.length < size) await sleep(20);

  const buildOf = async (drvPath: string) => (await server.sql<{ id: string }[]>`
    select b.id from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
    where d.drv_path = ${drvPath}`)[0]!.id;

  /** Opens the build page with the long-task observer in place; resolves once the live log is being read. */
  async function openBuild(buildId: string): Promise<{ page: Page; close(): Promise<void> }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // A string, not a function: this file is compiled without the DOM's types.
    await context.addInitScript({
      content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(server.kiln.ready.userToken)});
        window.__longTasks = [];
        new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration }); })
          .observe({ type: 'longtask', buffered: true });`,
    });
    const page = await context.newPage();
    await page.goto(`${server.kiln.ready.url}/builds/${buildId}`);
    await page.getByTestId('log-state').getByText(/streaming/).waitFor();
    // Loading the page is not what is measured: let its own work finish first.
    await page.evaluate('new Promise((resolve) => setTimeout(resolve, 1000))');
    return { page, close: () => context.close() };
  }

  const longTasksSince = async (page: Page, since: number) =>
    ((await page.evaluate('window.__longTasks')) as { start: number; duration: number }[]).filter((e) => e.start >= since);

  const figures = (tasks: { duration: number }[], seconds: number, cpu: CpuFigures): Round => ({
    longTasks: tasks.length,
    maxLongTaskMs: Math.round(Math.max(0, ...tasks.map((e) => e.duration))),
    blockingMs: Math.round(tasks.reduce((sum, e) => sum + e.duration - 50, 0)),
    seconds: Math.round(seconds * 10) / 10,
    ...cpu,
  });

  async function streamRound(job: { jobId: string; drvPath: string }, round: number): Promise<Round> {
    const end = `kiln-bench: end of log ${round}`;
    const log = logText(mib * 1024 * 1024, end);
    const { page, close } = await openBuild(await buildOf(job.drvPath));
    try {
      const trace = await traceMainThread(browser, page);
      const since = (await page.evaluate('performance.now()')) as number;
      const t0 = performance.now();
      for (let seq = 0; seq * CHUNK < log.length; seq++) {
        // On a schedule, not after a fixed pause: a late send does not slow the rest.
        const due = t0 + seq * CHUNK_EVERY_MS - performance.now();
        if (due > 0) await sleep(due);
        builder.send({ t: 'buildLog', jobId: job.jobId, seq, data: log.subarray(seq * CHUNK, (seq + 1) * CHUNK), droppedBytes: 0 });
      }
      await page.getByTestId('log').getByText(end).waitFor({ timeout: 120_000 }).catch(async (e: unknown) => {
        throw new Error(`the page did not draw the log's last line; it shows "${await page.getByTestId('log-state').textContent()}", follow ${String(await page.getByLabel('Follow').isChecked())}, last line drawn: ${String(await page.getByTestId('log').locator('.line').last().textContent())}`, { cause: e });
      });
      const seconds = (performance.now() - t0) / 1000;
      const cpu = await trace.stop();
      return figures(await longTasksSince(page, since), seconds, cpu);
    } finally {
      await close();
    }
  }

  async function idleRound(job: { drvPath: string }): Promise<Round> {
    const { page, close } = await openBuild(await buildOf(job.drvPath));
    try {
      const trace = await traceMainThread(browser, page);
      const since = (await page.evaluate('performance.now()')) as number;
      await sleep(mib * 1000);
      const cpu = await trace.stop();
      return figures(await longTasksSince(page, since), mib, cpu);
    } finally {
      await close();
    }
  }

  // Round 0 warms kiln and Chromium's code cache; it is not counted.
  const streamed: Round[] = [];
  const idle: Round[] = [];
  for (let round = 0; round <= rounds; round++) {
    const [a, b] = [jobs[2 * round]!, jobs[2 * round + 1] ?? jobs[0]!];
    let s: Round;
    let i: Round;
    if (round % 2 === 0) {
      s = await streamRound(a, round);
      i = await idleRound(b);
    } else {
      i = await idleRound(b);
      s = await streamRound(a, round);
    }
    console.log(`round ${round}${round === 0 ? ' (warm-up)' : ''}: streaming ${JSON.stringify(s)}, idle ${JSON.stringify(i)}, load average ${loadAverage()}`);
    if (round > 0) {
      streamed.push(s);
      idle.push(i);
    }
  }
  const summary = (rs: Round[]) => ({
    longTasks: { median: median(rs.map((r) => r.longTasks)), all: rs.map((r) => r.longTasks) },
    maxLongTaskMs: { median: median(rs.map((r) => r.maxLongTaskMs)), all: rs.map((r) => r.maxLongTaskMs) },
    blockingMs: { median: median(rs.map((r) => r.blockingMs)), all: rs.map((r) => r.blockingMs) },
    seconds: { median: median(rs.map((r) => r.seconds)), all: rs.map((r) => r.seconds) },
    cpuLongTasks: { median: median(rs.map((r) => r.cpuLongTasks)), all: rs.map((r) => r.cpuLongTasks) },
    maxTaskCpuMs: { median: median(rs.map((r) => r.maxTaskCpuMs)), all: rs.map((r) => r.maxTaskCpuMs) },
    mainThreadCpuMs: { median: median(rs.map((r) => r.mainThreadCpuMs)), all: rs.map((r) => r.mainThreadCpuMs) },
  });
  console.log(JSON.stringify({
    bench: 'live-log-tail', mib, rounds, rateMiBs, streaming: summary(streamed), idleBaseline: summary(idle),
    goal: 'no long task (every task < 50 ms)', loadAverage: loadAverage(),
  }));
  evaluator.close();
  builder.close();
} finally {
  await browser.close();
  await server.stop();
}
process.exit(0);
