// `kiln admin gc [--deep] [--no-wait] [--json]` (issue 20, docs/gc.md) as users run it: a child
// process against a real server whose collector runs on its own loop (woken by the request), so
// the command waits for the run to end and prints its results; a non-superuser is refused.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../support/kiln.js';
import { kilnCli } from '../support/kilnCli.js';
import { signUp } from '../support/accounts.js';

t.test('kiln admin gc', async (t) => {
  const kiln = await startTestKiln(t, {}, { gcLoop: true });
  const ada = await signUp(kiln, 'ada'); // the first account: a superuser
  const bob = await signUp(kiln, 'bob');
  const envOf = (token: string) => ({ HOME: mkdtempSync(join(tmpdir(), 'kiln-cli-gc-')), KILN_SERVER: kiln.url, KILN_TOKEN: token });

  t.test('a pass: requested, waited for, its results printed', async (t) => {
    const run = await kilnCli(['admin', 'gc', '--json'], envOf(ada.token));
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, { kind: 'pass', state: 'finished', result: { paths: 0, bytes: 0, phases_ms: {} } });
    const text = await kilnCli(['admin', 'gc'], envOf(ada.token));
    t.equal(text.status, 0, text.stderr);
    t.match(text.stdout, /^Pass \d+: finished\n(.|\n)*  paths: 0\n/);
  });

  t.test('--deep: a deep round', async (t) => {
    const run = await kilnCli(['admin', 'gc', '--deep', '--json'], envOf(ada.token));
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, { kind: 'deep', state: 'finished', result: { missing_blobs: 0 } });
  });

  t.test('--no-wait returns the request', async (t) => {
    const run = await kilnCli(['admin', 'gc', '--no-wait', '--json'], envOf(ada.token));
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, { kind: 'pass', state: /^(requested|running|finished)$/ });
  });

  t.test('not a superuser: refused, exit 1', async (t) => {
    const run = await kilnCli(['admin', 'gc', '--json'], envOf(bob.token));
    t.equal(run.status, 1);
    t.match(run.json, { error: true, code: 'forbidden' });
  });
});
