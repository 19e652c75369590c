// Per-component levels, and no secrets in log lines.
import t from 'tap';
import { componentLogger, createLogger, loadConfig, type Config } from '../../config/index.js';

function capture(config: Config, scope: 'server' | 'worker' = 'server') {
  const lines: Record<string, unknown>[] = [];
  const destination = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
  return { root: createLogger(config, { destination, base: { service: 'kiln' }, scope }), lines };
}

t.test('a component logs at its own level, null falls back to the default', async (t) => {
  const { values } = loadConfig({ scope: 'server', env: { SERVICE_LOG_LEVEL_DEFAULT: 'warn', SERVICE_LOG_LEVEL_CACHE: 'debug' } });
  const { root, lines } = capture(values);
  const cache = componentLogger(root, 'cache');
  const web = componentLogger(root, 'web');
  cache.debug('cache detail');
  web.info('web chatter');
  web.warn('web warning');
  root.info('root chatter');
  t.same(lines.map((l) => [l.component, l.msg]), [['cache', 'cache detail'], ['web', 'web warning']]);
  t.equal(lines[0]?.service, 'kiln');
});

t.test('the worker uses worker.log.level.*', async (t) => {
  const { values } = loadConfig({ scope: 'worker', env: { SERVICE_WORKER_LOG_LEVEL_BUILD: 'trace', SERVICE_LOG_LEVEL_DEFAULT: 'trace' } });
  const { root, lines } = capture(values, 'worker');
  componentLogger(root, 'build').trace('build trace');
  componentLogger(root, 'eval').debug('eval debug');
  t.same(lines.map((l) => l.msg), ['build trace']);
});

t.test('credentials in logged objects are redacted', async (t) => {
  const { values } = loadConfig({ scope: 'server', env: {} });
  const { root, lines } = capture(values);
  root.info({ password: 'hunter2', req: { headers: { authorization: 'Bearer SVCx', cookie: 'k=v' } }, token: 't' }, 'login');
  const line = JSON.stringify(lines[0]);
  t.notMatch(line, /hunter2|SVCx|k=v|"t"/);
  t.match(line, /\[secret\]/);
});
