import t from 'tap';
import { backoffDelayMs, BACKOFF_CAP_MS, dependencyOrder, nixString, rechunk, toDerivationNode } from '../../worker/index.js';
import type { DerivationNode } from '../../protocol/index.js';

const drv = (n: string) => `/nix/store/${n.repeat(32)}-${n}.drv`;
const node = (n: string, inputs: string[]): DerivationNode => ({
  drvPath: drv(n), name: n, outputs: { out: null }, inputDrvs: Object.fromEntries(inputs.map((i) => [drv(i), ['out']])), inputSrcs: [],
  system: 'x86_64-linux', requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
});

t.test('dependency order: inputs first, stable, inputs outside the set ignored', async (t) => {
  const nodes = new Map([node('d', ['b', 'c']), node('c', ['a']), node('b', ['a', 'z']), node('a', [])].map((x) => [x.drvPath, x]));
  t.same(dependencyOrder(nodes).map((x) => x.name), ['a', 'b', 'c', 'd']);
  const cycle = new Map([node('a', ['b']), node('b', ['a'])].map((x) => [x.drvPath, x]));
  t.throws(() => dependencyOrder(cycle), /cycle/);
});

t.test('show-derivation to a node: plain and structured attributes', async (t) => {
  const plain = toDerivationNode(drv('a'), {
    outputs: { out: { path: '/nix/store/aaaa-out' }, src: { path: '/nix/store/bbbb-src', hash: 'abc', hashAlgo: 'sha256' } },
    inputSrcs: [], inputDrvs: {}, system: 'x86_64-linux',
    env: { name: 'hello', requiredSystemFeatures: 'kvm big-parallel', timeout: '600', maxSilent: 'soon', preferLocalBuild: '1' },
  });
  t.match(plain, { name: 'hello', requiredSystemFeatures: ['kvm', 'big-parallel'], timeoutSecs: 600, maxSilentSecs: null, preferLocalBuild: true, fixedOutput: true });
  const structured = toDerivationNode(drv('b'), {
    outputs: { out: {} }, inputSrcs: [], inputDrvs: {}, system: 'aarch64-linux',
    env: { __json: JSON.stringify({ name: 'x', requiredSystemFeatures: ['nixos-test'], maxSilent: 60, preferLocalBuild: false }) },
  });
  t.match(structured, { name: 'b', outputs: { out: null }, requiredSystemFeatures: ['nixos-test'], maxSilentSecs: 60, timeoutSecs: null, fixedOutput: false });
});

t.test('nixString escapes what Nix would interpret', async (t) => {
  t.equal(nixString('a"b\\c${d}$e'), '"a\\"b\\\\c\\${d}$e"');
});

t.test('rechunk cuts any stream into chunks of exactly the size', async (t) => {
  async function* pieces() {
    yield Buffer.alloc(3, 1);
    yield Buffer.alloc(10, 2);
    yield new Uint8Array(0);
    yield Buffer.alloc(4, 3);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of rechunk(pieces(), 5)) chunks.push(chunk);
  t.same(chunks.map((c) => c.length), [5, 5, 5, 2]);
  t.same(Buffer.concat(chunks), Buffer.concat([Buffer.alloc(3, 1), Buffer.alloc(10, 2), Buffer.alloc(4, 3)]));
});

t.test('backoff: doubling from 1 s, jitter downwards, capped at 60 s', async (t) => {
  t.same([0, 1, 2, 3].map((n) => backoffDelayMs(n, () => 0)), [1000, 2000, 4000, 8000]);
  t.equal(backoffDelayMs(1, () => 0.999), 1600, 'at most 20 % below');
  t.equal(backoffDelayMs(10, () => 0), BACKOFF_CAP_MS);
  t.equal(backoffDelayMs(1000, () => 0), BACKOFF_CAP_MS);
});
