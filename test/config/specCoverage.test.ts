// The registry against spec/configuration.md: every option of its tables and of its prose is
// declared, with the spec's env column, nullability, bounds and defaults.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import t from 'tap';
import { isOptionPath, levels, optionAt, optionPaths, registry, type Option } from '../../config/index.js';
import { DerivedDefault } from '../../config/option.js';

interface SpecOption {
  readonly path: string;
  readonly type: string;
  readonly default: string;
  readonly env: boolean;
}

// The contract lives beside the repository (../shared/spec; CI lays a copy of shared/ beside its clone).
// KILN_SPEC_DIR points elsewhere. A missing spec is a failure, never a skip: a skipped check guards nothing.
const specCandidates = [
  ...(process.env['KILN_SPEC_DIR'] ? [pathToFileURL(`${process.env['KILN_SPEC_DIR']}/configuration.md`)] : []),
  new URL('../../../shared/spec/configuration.md', import.meta.url),
  pathToFileURL(`${process.cwd()}/../shared/spec/configuration.md`),
  new URL('file:///work/shared/spec/configuration.md'),
];
const specFile = specCandidates.find((u) => existsSync(u));
const withSpec = { skip: specFile ? false : 'no spec to compare the registry with (failed below)' };

t.test('the spec is found beside the checkout', async (t) => {
  t.ok(specFile, `spec/configuration.md is in none of: ${specCandidates.map((u) => fileURLToPath(u)).join(', ')}; set KILN_SPEC_DIR`);
});

/** `log.level.cache, log.level.proto` and `worker.log.level.build, .eval, .proto` name several options. */
function expandNames(cell: string): string[] {
  const names = cell.split(',').map((name) => name.trim());
  const prefix = (names[0] ?? '').replace(/\.[^.]+$/, '');
  return names.map((name) => (name.startsWith('.') ? prefix + name : name));
}

/** Options the prose names: `worker.packages.git, .gradient (…) and .ssh (…)`, `worker.reverseProxy.proxyA.enable (false), …`. */
function proseOptions(paragraph: string): SpecOption[] {
  const found: SpecOption[] = [];
  let prefix = '';
  for (const match of paragraph.matchAll(/(?<=^|[\s,])(worker(?:\.\w+)+|\.\w+)(?: \(([^)]*)\))?/g)) {
    const token = match[1] ?? '';
    const path = token.startsWith('.') ? prefix + token : token;
    prefix = path.replace(/\.[^.]+$/, '');
    const fallback = match[2] ?? 'derived';
    const type = path.startsWith('worker.packages.') ? 'package' : fallback === 'null' ? 'null or string' : fallback === 'empty' ? 'strings joined by newline' : 'bool';
    found.push({ path, type, default: path.startsWith('worker.packages.') ? 'derived' : fallback, env: false });
  }
  return found;
}

function parseSpec(markdown: string): SpecOption[] {
  const options: SpecOption[] = [];
  let hasEnvColumn = false;
  let sectionWithoutEnv = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('### ')) sectionWithoutEnv = /no environment variables/.test(line);
    else if (/None of these has an environment variable/.test(line)) sectionWithoutEnv = true;
    else if (line.startsWith('| Option')) hasEnvColumn = line.includes('| Env |');
    else if (/^worker\.(packages|reverseProxy)\./.test(line)) options.push(...proseOptions(line));
    else if (line.startsWith('| ') && !line.startsWith('|---')) {
      const cells = line.slice(1, -1).split('|').map((cell) => cell.trim());
      const [names = '', type = '', fallback = ''] = cells;
      const meaning = cells[cells.length - 1] ?? '';
      const env = (hasEnvColumn ? cells[3] === 'y' : !sectionWithoutEnv) && !meaning.includes('(env -)');
      for (const path of expandNames(names)) options.push({ path, type, default: fallback, env });
    }
  }
  return options;
}

const spec = specFile ? parseSpec(readFileSync(specFile, 'utf8')) : [];
const specPaths = new Set(spec.map((option) => option.path));

t.test('the spec parses into its 207 options, the grouped and prose-listed ones included', withSpec, async (t) => {
  t.equal(spec.length, 207);
  t.equal(specPaths.size, 207, 'no option is listed twice');
  for (const path of ['log.level.web', 'worker.log.level.eval', 'packages.server', 'worker.packages.ssh', 'worker.reverseProxy.proxyA.useCertHost', 'worker.reverseProxy.proxyB.enable']) {
    t.ok(specPaths.has(path), path);
  }
});

t.test('every option of the spec is in the registry', withSpec, async (t) => {
  const missing = spec.map((option) => option.path).filter((path) => !isOptionPath(path));
  t.same(missing, []);
});

t.test('every other option of the registry is an extension, and every extension is beyond the spec', withSpec, async (t) => {
  const extra = optionPaths.filter((path) => !specPaths.has(path));
  t.same(extra, optionPaths.filter((path) => optionAt(path).extension));
  t.same(extra.sort(), ['build.runOnBuildServers', 'cache.keyOverlapHours', 'cache.keyRotationMinIntervalSecs', 'cache.serveArchiveConcurrency', 'gitHostApp.apiUrl', 'gitHostApp.cloneUrl', 'http.threads', 'localDb.port', 'outbound.allowedNetworks', 'projects.allowLocalRepositories', 'projects.minPollIntervalSecs', 'redis.url', 'ssh.idleTimeoutSecs', 'ssh.loginGraceSecs', 'ssh.maxSessionsPerUser', 'tls.certFile', 'tls.keyFile', 'upload.minBytesPerSec', 'worker.build.builders', 'worker.storeRoot', 'worker.storeRootMaxMb']);
  t.equal(optionPaths.length, 207 + extra.length, 'the spec\'s 207 options and the extensions');
});

t.test('the env column agrees', withSpec, async (t) => {
  const disagree = spec.filter((option) => isOptionPath(option.path) && optionAt(option.path).env !== option.env).map((o) => o.path);
  t.same(disagree, []);
});

const unprefixed = (type: string) => type.replace(/^null or /, '');

/** The spec's type words against the declared kind. */
function typeProblem(specType: string, option: Option<unknown>): string | undefined {
  const type = unprefixed(specType);
  const nullable = specType.startsWith('null or ');
  if (nullable && !option.nullable) return 'should accept null';
  const bounds = /^int(?:eger)? (-?\d+) to (-?\d+)$/.exec(type);
  if (bounds) return option.bounds?.min === Number(bounds[1]) && option.bounds?.max === Number(bounds[2]) ? undefined : `bounds ${JSON.stringify(option.bounds)}`;
  if (type === 'positive int') return option.bounds?.min === 1 ? undefined : 'min should be 1';
  if (type === 'unsigned int') return option.bounds?.min === 0 ? undefined : 'min should be 0';
  if (type === 'port') return option.type === 'port' ? undefined : option.type;
  if (type === 'bool') return option.isBool ? undefined : option.type;
  if (type === 'level') return option.choices?.join() === levels.join() ? undefined : 'should be a level';
  if (/ or /.test(type)) return option.choices?.join() === type.split(/, | or /).join() ? undefined : `choices ${option.choices?.join()}`;
  if (type.startsWith('attribute set')) return option.type.startsWith('attribute set') ? undefined : option.type;
  return unprefixed(option.type) === type ? undefined : `declared ${option.type}`;
}

t.test('types, nullability and bounds agree', withSpec, async (t) => {
  const problems = spec.flatMap((s) => {
    const problem = isOptionPath(s.path) ? typeProblem(s.type, optionAt(s.path)) : 'missing';
    return problem === undefined ? [] : [`${s.path} (${s.type}): ${problem}`];
  });
  t.same(problems, []);
});

/** Where the spec describes a default in words, kiln's concrete choice. */
const describedDefaults: Record<string, unknown> = {
  baseDir: '/var/lib/kiln',
  'worker.baseDir': '/var/lib/kiln-worker',
  'email.from.name': 'kiln',
  'database.url': 'postgres://kiln@/kiln?host=/var/run/postgresql',
  'database.urlFile': null,
  'worker.gcrootsDir': '/nix/var/nix/gcroots/kiln-worker',
  'packages.frontend': null,
  'packages.server': null,
  'worker.packages.git': null,
  'worker.packages.gradient': null,
  'worker.packages.nix': null,
  'worker.packages.ssh': null,
};
const computedDefaults = ['serveUrl', 'localWorker', 'frontend.url', 'reverseProxy.proxyB.enable', 'worker.nixDaemon.maxConnections', 'worker.build.cgroup', 'worker.system.architectures'];

function expectedDefault(s: SpecOption): unknown {
  if (Object.hasOwn(describedDefaults, s.path)) return describedDefaults[s.path];
  if (computedDefaults.includes(s.path)) return 'derived';
  const text = s.default;
  if (text === 'none' || text === 'null') return null;
  if (text === 'true' || text === 'false') return text === 'true';
  if (/^-?\d+$/.test(text)) return Number(text);
  if (text === 'empty') return s.type.startsWith('list') ? [] : s.type.startsWith('attribute set') ? {} : '';
  if (s.type.startsWith('list')) return text.split(',').map((item) => item.trim());
  return text;
}

t.test('defaults agree', withSpec, async (t) => {
  const problems = spec.flatMap((s) => {
    if (!isOptionPath(s.path)) return [];
    const declared = optionAt(s.path).default;
    const actual = declared instanceof DerivedDefault ? 'derived' : declared;
    const expected = expectedDefault(s);
    return JSON.stringify(actual) === JSON.stringify(expected) ? [] : [`${s.path}: spec "${s.default}", declared ${JSON.stringify(actual)}`];
  });
  t.same(problems, []);
});

t.test('every declaration has a meaning and a valid default', async (t) => {
  const problems = optionPaths.flatMap((path) => {
    const option = optionAt(path);
    const meaningless = option.meaning.length < 4 ? [`${path} has no meaning`] : [];
    const invalid = !(option.default instanceof DerivedDefault) && !option.schema.safeParse(option.default).success;
    return [...meaningless, ...(invalid ? [`${path}: default ${JSON.stringify(option.default)} is not ${option.expected}`] : [])];
  });
  t.same(problems, []);
  t.equal(Object.keys(registry).length, optionPaths.length);
});
