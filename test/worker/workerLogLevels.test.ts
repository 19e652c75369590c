// worker.log.level.* in a running worker (docs/metrics.md, "Logs"; the in-process worker with real
// Nix): the build, eval and proto components each write their info line (a build that fails, an
// evaluation that fails, the connection's handshake) at info under a default of warn, and none at
// error under a default of info. The worker logs through a child of the root logger (its worker
// id on every line); each component's level must survive that.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createLogger, loadConfig } from '../../config/index.js';
import { createFlakeRepo, testFlake } from '../support/flakeRepo.js';
import { startInProcessWorker } from '../support/inProcessWorker.js';
import { requireNix, tempDir } from '../support/nixStore.js';

requireNix();
const dir = tempDir('kiln-worker-levels-');
const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': testFlake(randomUUID()) });

interface Line { level: number; component?: string; msg: string }

const COMPONENT_LINES = { build: /build failed/, eval: /evaluation failed/, proto: /connected; handshaking/ } as const;

async function linesOf(t: Test, name: string, levels: Record<string, string>): Promise<Line[]> {
  const lines: Line[] = [];
  const config = loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.serverUrl': 'ws://127.0.0.1:1/proto', ...levels } }).values;
  const log = createLogger(config, { scope: 'worker', destination: { write: (l: string) => void lines.push(JSON.parse(l) as Line) } });
  const { session } = await startInProcessWorker(t, join(dir, name), levels, { log });
  // Each job's line is written before its answer is sent.
  session.send({ t: 'buildJob', jobId: 'missing-drv', drvPath: '/nix/store/00000000000000000000000000000000-missing.drv', substituters: [], targetCaches: [], timeoutSecs: 0, maxSilentSecs: 0 });
  t.match(await session.outcome('missing-drv'), { t: 'jobFailed' });
  session.send({ t: 'evalJob', project: randomUUID(), jobId: 'bad-wildcard', repository: repo.url, commit: repo.commit, attributes: '!packages', timeoutSecs: 0 });
  t.match(await session.outcome('bad-wildcard'), { t: 'jobFailed' });
  return lines;
}

t.test('worker.log.level.build, .eval and .proto at info under a default of warn: each one\'s info line', async (t) => {
  const lines = await linesOf(t, 'info', {
    'worker.log.level.default': 'warn', 'worker.log.level.build': 'info', 'worker.log.level.eval': 'info', 'worker.log.level.proto': 'info',
  });
  for (const [component, message] of Object.entries(COMPONENT_LINES)) {
    t.ok(lines.some((l) => l.component === component && l.level === 30 && message.test(l.msg)), `${component}'s info line`);
  }
  t.same(lines.filter((l) => l.level < 40 && !(l.component !== undefined && l.component in COMPONENT_LINES)).map((l) => `${l.component}: ${l.msg}`), [], 'nothing else below warn');
});

t.test('worker.log.level.build, .eval and .proto at error under a default of info: their info lines are gone', async (t) => {
  const lines = await linesOf(t, 'error', {
    'worker.log.level.default': 'info', 'worker.log.level.build': 'error', 'worker.log.level.eval': 'error', 'worker.log.level.proto': 'error',
  });
  for (const component of Object.keys(COMPONENT_LINES)) {
    t.same(lines.filter((l) => l.component === component && l.level < 50).map((l) => l.msg), [], `nothing of ${component} below error`);
  }
  t.ok(lines.some((l) => l.level === 30 && /kiln worker started/.test(l.msg)), 'the default\'s info lines are written');
});
