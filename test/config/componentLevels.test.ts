// log.level.* on a running server (docs/metrics.md, "Logs"): the HTTP server logs with the web
// component's level, not the default's (its "listening" line at info shows it), and with the
// default at warn no other component logs below warn. Which other service gets which component's
// logger is read in cli/kiln.ts and services/assembly/createServices.ts; no routine line of theirs
// at start shows it here.
import t, { type Test } from 'tap';
import { createLogger, loadConfig } from '../../config/index.js';
import { startTestKiln } from '../support/kiln.js';

interface Line { level: number; component?: string; msg: string }

async function linesOf(t: Pick<Test, 'teardown'>, overrides: Record<string, string>): Promise<Line[]> {
  const lines: Line[] = [];
  const config = loadConfig({ scope: 'server', env: {}, overrides }).values;
  const log = createLogger(config, { destination: { write: (l: string) => void lines.push(JSON.parse(l) as Line) } });
  const kiln = await startTestKiln(t, overrides, { log });
  await fetch(`${kiln.url}/api/v1/health`);
  await kiln.upkeep.settle();
  return lines;
}

t.test('log.level.web info under a default of warn: the web lines, and no other component below warn', async (t) => {
  const lines = await linesOf(t, { 'log.level.default': 'warn', 'log.level.web': 'info' });
  t.same(lines.filter((l) => l.level < 40 && l.component !== 'web').map((l) => `${l.component}: ${l.msg}`), []);
  t.ok(lines.some((l) => l.component === 'web' && l.level === 30 && /listening/.test(l.msg)), 'web\'s info line');
});

t.test('log.level.web error under a default of info: web\'s info line is gone', async (t) => {
  const lines = await linesOf(t, { 'log.level.default': 'info', 'log.level.web': 'error' });
  t.notOk(lines.some((l) => l.component === 'web' && l.level < 50), 'nothing of web below error');
});
