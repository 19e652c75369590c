// The dead-export check: knip (configured in knip.json) lists exports, exported types and files
// nothing imports. Those it found when the check began are in deadExports.baseline; anything else
// it reports fails here, so a new dead export fails CI, and so does a baseline line whose export
// is gone (the list only shrinks).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';

const root = fileURLToPath(new URL('../..', import.meta.url));
// KNIP_BIN: a knip installed elsewhere (the dev dependency is the default).
const knip = process.env['KNIP_BIN'] ?? fileURLToPath(new URL('../../node_modules/knip/bin/knip.js', import.meta.url));

interface KnipSymbol {
  name: string;
}
interface KnipReport {
  issues: ({ file: string } & Record<string, unknown>)[];
}

/** "file kind name" for every issue knip reports, as the baseline writes them. */
function reported(report: KnipReport): Set<string> {
  const lines = new Set<string>();
  for (const issue of report.issues) {
    for (const [kind, found] of Object.entries(issue)) {
      if (!Array.isArray(found)) continue;
      for (const symbol of found as (KnipSymbol | string)[]) lines.add(`${issue.file} ${kind} ${typeof symbol === 'string' ? symbol : symbol.name}`);
    }
  }
  return lines;
}

t.test('knip finds no dead export, exported type or file beyond the baseline', async (t) => {
  t.ok(existsSync(knip), `knip is at ${knip} (a dev dependency: npm ci installs it)`);
  // knip exits 1 when it reports anything; its JSON report is on stdout either way.
  const stdout = await promisify(execFile)(process.execPath, [knip, '--no-progress', '--reporter', 'json'], { cwd: root, maxBuffer: 64 << 20 })
    .then((r) => r.stdout, (e: { stdout?: string; stderr?: string }) => {
      if (!e.stdout) throw new Error(`knip failed: ${e.stderr ?? String(e)}`);
      return e.stdout;
    });
  const found = reported(JSON.parse(stdout) as KnipReport);
  const baseline = new Set(readFileSync(new URL('deadExports.baseline', import.meta.url), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#')));
  const added = [...found].filter((l) => !baseline.has(l)).sort();
  const gone = [...baseline].filter((l) => !found.has(l)).sort();
  t.same(added, [], 'unused (remove the export, or import it where it is meant to be used)');
  t.same(gone, [], 'used or removed since: delete these lines from test/architecture/deadExports.baseline');
});
