// Every build status and evaluation phase write goes through the lifecycle modules, which check the
// move against actors/lifecycles.ts and emit its events: no other source file may write them. The
// readiness counter moves only with the status changes (buildStatus.ts) that it follows.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const ALLOWED = new Set(['services/builds/buildStatus.ts', 'services/builds/evaluationPhases.ts']);
// bench/ seeds rows of finished builds straight into the tables, as test/ does
const SKIPPED = new Set(['node_modules', 'test', 'bench', '.git']);

/** `update <table> [alias] set …` statements whose set list assigns `column`. */
function writesColumn(source: string, table: string, column: string): boolean {
  const statements = new RegExp(`update\\s+${table}\\b(?:\\s+(?!set\\b)\\w+)?\\s+set\\s+([\\s\\S]*?)(?:\\bwhere\\b|\\bfrom\\b|\\breturning\\b|\`|;|$)`, 'gi');
  for (const [, setList] of source.matchAll(statements)) {
    if (new RegExp(`(?:^|,)\\s*${column}\\s*=`, 'i').test(setList!)) return true;
  }
  return false;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (SKIPPED.has(entry.name)) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

t.test('the guard recognizes a status or phase write, aliased or not, and nothing else', async (t) => {
  t.ok(writesColumn('update derivation_builds set status = $1', 'derivation_builds', 'status'));
  t.ok(writesColumn('update derivation_builds db set outputs_cached = true, status = $1 from derivations d', 'derivation_builds', 'status'));
  t.ok(writesColumn('update evaluations set phase = $1 where id = $2', 'evaluations', 'phase'));
  t.notOk(writesColumn('update derivation_builds set outputs_cached = true where status = $1', 'derivation_builds', 'status'));
  t.notOk(writesColumn('update evaluations set error = $1 where phase = $2', 'evaluations', 'phase'));
});

t.test('no source outside the lifecycle modules writes a build status or an evaluation phase', async (t) => {
  const files = sourceFiles(root);
  t.ok(files.length > 100, 'the walk found the sources');
  const offenders = files.map((file) => relative(root, file)).filter((file) => {
    if (ALLOWED.has(file)) return false;
    const source = readFileSync(join(root, file), 'utf8');
    return writesColumn(source, 'derivation_builds', 'status') || writesColumn(source, 'evaluations', 'phase');
  });
  t.same(offenders, [], 'route them through services/builds/buildStatus.ts or services/builds/evaluationPhases.ts');
  for (const file of ALLOWED) {
    const source = readFileSync(join(root, file), 'utf8');
    t.ok(writesColumn(source, 'derivation_builds', 'status') || writesColumn(source, 'evaluations', 'phase'), `${file} still holds its write`);
  }
});

t.test('no source outside buildStatus.ts moves the readiness counter', async (t) => {
  const offenders = sourceFiles(root).map((file) => relative(root, file))
    .filter((file) => file !== 'services/builds/buildStatus.ts' && writesColumn(readFileSync(join(root, file), 'utf8'), 'derivation_builds', 'inputs_remaining'));
  t.same(offenders, [], 'inputs_remaining follows the status changes in services/builds/buildStatus.ts');
  t.ok(writesColumn(readFileSync(join(root, 'services/builds/buildStatus.ts'), 'utf8'), 'derivation_builds', 'inputs_remaining'), 'buildStatus.ts still moves it');
});
