import t from 'tap';
import { formatAttributePath, isExcluded, parseAttributeWildcard, wildcardSelects, type AttributeWildcard } from '../../../protocol/index.js';

const parse = (text: string): AttributeWildcard => {
  const parsed = parseAttributeWildcard(text);
  if (!parsed.ok) throw new Error(`${parsed.field}: ${parsed.reason}`);
  return parsed.value;
};
const p = (text: string) => text.split('.');

t.test('* selects any name at its level, and only at that depth', async (t) => {
  const w = parse('packages.x86_64-linux.*');
  t.ok(wildcardSelects(w, p('packages.x86_64-linux.hello')));
  t.notOk(wildcardSelects(w, p('packages.aarch64-linux.hello')));
  t.notOk(wildcardSelects(w, p('packages.x86_64-linux')), 'a prefix is not selected');
  t.notOk(wildcardSelects(w, p('packages.x86_64-linux.hello.out')), 'nor anything deeper');
});

t.test('globs inside a segment, several patterns, exclusions of paths and subtrees', async (t) => {
  const w = parse('packages.*.*, checks.x86_64-linux.test-*\n!packages.*.big-*, !packages.aarch64-linux');
  t.ok(wildcardSelects(w, p('packages.x86_64-linux.small')));
  t.notOk(wildcardSelects(w, p('packages.x86_64-linux.big-one')), 'excluded by a glob');
  t.notOk(wildcardSelects(w, p('packages.aarch64-linux.small')), 'excluded with its whole subtree');
  t.ok(isExcluded(w, p('packages.aarch64-linux')));
  t.ok(wildcardSelects(w, p('checks.x86_64-linux.test-unit')));
  t.notOk(wildcardSelects(w, p('checks.x86_64-linux.lint')));
});

t.test('quoted segments are literal: dots, stars, quotes', async (t) => {
  const w = parse('hydraJobs."a.b"."*", "x\\"y".z');
  t.ok(wildcardSelects(w, ['hydraJobs', 'a.b', '*']));
  t.notOk(wildcardSelects(w, ['hydraJobs', 'a.b', 'anything']), 'a quoted * is a name');
  t.ok(wildcardSelects(w, ['x"y', 'z']));
  t.same(w.include[0], [{ kind: 'literal', name: 'hydraJobs' }, { kind: 'literal', name: 'a.b' }, { kind: 'literal', name: '*' }]);
});

t.test('glob regexes escape what POSIX regexes would read', async (t) => {
  const w = parse('a.x+y*');
  t.same(w.include[0]![1], { kind: 'glob', source: 'x+y*', regex: 'x\\+y.*' });
  t.ok(wildcardSelects(w, ['a', 'x+y-1']));
  t.notOk(wildcardSelects(w, ['a', 'xxy']));
});

t.test('mistakes are named', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['', 'attributes', /empty/],
    [' , ,', 'attributes', /empty/],
    ['!packages.*', 'attributes', /every pattern starts with "!"/],
    ['packages..x', 'attributes pattern 1', /empty segment/],
    ['packages.x.', 'attributes pattern 1', /empty segment/],
    ['a, packages."open', 'attributes pattern 2', /unterminated/],
    ['a."b"c', 'attributes pattern 1', /expected "\." after a quoted segment/],
    ['a.b c', 'attributes pattern 1', /quote it/],
    [Array.from({ length: 65 }, (_, i) => `a${i}`).join(','), 'attributes', /more than 64 patterns/],
    [Array.from({ length: 33 }, () => 'a').join('.'), 'attributes pattern 1', /more than 32 segments/],
  ];
  for (const [text, field, reason] of cases) t.match(parseAttributeWildcard(text), { ok: false, field, reason }, JSON.stringify(text.slice(0, 30)));
});

t.test('formatAttributePath quotes names that are not identifiers', async (t) => {
  t.equal(formatAttributePath(['packages', 'x86_64-linux', 'a.b', 'say "hi"']), 'packages.x86_64-linux."a.b"."say \\"hi\\""');
});
