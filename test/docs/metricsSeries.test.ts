// docs/metrics.md against the registry of a running server: every kiln_* family a scrape shows has
// a row in the "Series" table (by name, or by a prefix row such as `kiln_process_*`), and every
// family the table names is registered, so the table neither lags nor invents.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { parseScrape } from '../support/prometheus.js';

const docs = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');

/** The series table's first column: each row names one or more families in backticks. */
function documentedFamilies(text: string): { names: Set<string>; prefixes: string[] } {
  const section = text.split('\n## Series\n')[1]?.split('\n## ')[0] ?? '';
  const names = new Set<string>();
  const prefixes: string[] = [];
  for (const line of section.split('\n')) {
    const first = /^\| ([^|]+) \|/.exec(line)?.[1] ?? '';
    for (const [, name] of first.matchAll(/`(kiln_[a-z0-9_*]+)`/g)) {
      if (name!.endsWith('*')) prefixes.push(name!.slice(0, -1));
      else names.add(name!);
    }
  }
  return { names, prefixes };
}

t.test('every registered kiln_* family is in docs/metrics.md, and every documented one is registered', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-metrics-docs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'token'), 'docs-secret\n');
  const kiln = await startTestKiln(t, { 'metrics.tokenFile': join(dir, 'token') });
  const res = await fetch(`${kiln.url}/metrics`, { headers: { authorization: 'Bearer docs-secret' } });
  t.equal(res.status, 200);
  const registered = [...parseScrape(await res.text()).types.keys()].filter((name) => name.startsWith('kiln_'));
  t.ok(registered.length > 20, `${registered.length} families registered`);
  const { names, prefixes } = documentedFamilies(docs);
  t.ok(names.size > 20, 'the table was found');
  const undocumented = registered.filter((name) => !names.has(name) && !prefixes.some((p) => name.startsWith(p)));
  t.same(undocumented, [], 'registered but not in docs/metrics.md\'s series table');
  const unregistered = [...names].filter((name) => !registered.includes(name));
  t.same(unregistered, [], 'in the table but not registered');
});
