// A quiet newcomer experience (issue 25, item 6): under the system's older Node, bin/kiln.js refuses
// with one line, and npm's EBADENGINE warnings (ten lines before every command) stay silent (.npmrc).
import t from 'tap';
import { spawnSync } from 'node:child_process';

const SYSTEM_NODE = '/usr/bin/node';
// A newcomer's shell: none of the test runner's NODE_* settings (its loaders are for this Node, not the system's).
const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root' };
// tap's process tracking adds its NODE_OPTIONS to every child; `env -u` takes them off again.
const bare = (command: string, args: string[], extra: NodeJS.ProcessEnv = {}) =>
  spawnSync('env', ['-u', 'NODE_OPTIONS', command, ...args], { encoding: 'utf8', env: { ...env, ...extra } });
const probe = bare(SYSTEM_NODE, ['--version']);
const systemMajor = Number(/^v(\d+)/.exec(probe.stdout ?? '')?.[1] ?? NaN);

t.test('an old Node', { skip: probe.status === 0 && systemMajor < 22 ? false : `needs an older system Node at ${SYSTEM_NODE} (found ${probe.stdout?.trim() || probe.stderr?.trim() || String(probe.error)})` }, async (t) => {
  t.test('bin/kiln.js refuses it with one clear line', async (t) => {
    const run = bare(SYSTEM_NODE, ['bin/kiln.js', '--version']);
    t.equal(run.status, 1);
    t.equal(run.stdout, '');
    t.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
    t.match(run.stderr, /needs Node 22 or newer \(this is v\d+/);
  });

  t.test('npm runs kiln on its own Node without EBADENGINE warnings', async (t) => {
    // The system Node first on the PATH, as on a newcomer's machine; npm adds node_modules/.bin (kiln's Node 22) in front.
    const run = bare('npm', ['run', 'kiln', '--', '--version'], { PATH: `/usr/bin:${process.env['PATH'] ?? ''}` });
    t.equal(run.status, 0, run.stderr);
    t.match(run.stdout.trim(), /(^|\n)0\.1\.0$/);
    t.notMatch(run.stderr, /EBADENGINE/);
  });
});
