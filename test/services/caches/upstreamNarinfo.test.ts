import t from 'tap';
import { parseNarinfo, renderNarinfo, signNarinfo, SigningKey, VerifyingKey, verifyNarinfo, type Narinfo } from '../../../protocol/index.js';
import { adoptUpstreamNarinfo, isProxiablePath } from '../../../services/caches/upstreamNarinfo.js';
import { Semaphore } from '../../../services/caches/semaphore.js';
import { eventually } from '../../support/eventually.js';

const hash = '0'.repeat(31) + '1';
const upstreamKey = SigningKey.generate('upstream-1');
const cacheKey = SigningKey.generate('kiln-main-1');
const upstream = { id: '11111111-2222-3333-4444-555555555555', url: 'http://up.example/cache', key: upstreamKey.publicKey };

function narinfo(over: Partial<Narinfo> = {}, signer: SigningKey | null = upstreamKey): string {
  const info: Narinfo = {
    storePath: `/nix/store/${hash}-hello`, url: `nar/${'a'.repeat(52)}.nar.xz`, compression: 'xz',
    narHash: `sha256:${'1'.repeat(52)}`, narSize: 1234, references: [`${hash}-hello`], sigs: [], ...over,
  };
  return renderNarinfo({ ...info, sigs: signer ? [signNarinfo(info, signer)] : [] });
}

t.test('a valid answer is re-signed and points through kiln', async (t) => {
  const adopted = adoptUpstreamNarinfo(narinfo(), hash, upstream, cacheKey);
  t.ok(adopted.ok);
  if (!adopted.ok) return;
  const info = parseNarinfo(adopted.text);
  t.ok(info.ok);
  if (!info.ok) return;
  t.equal(info.value.url, `upstream/${upstream.id}/${hash}/nar/${'a'.repeat(52)}.nar.xz`);
  t.equal(info.value.compression, 'xz', 'the file is served as the upstream stores it');
  t.equal(info.value.sigs.length, 2);
  t.ok(verifyNarinfo(info.value, [cacheKey.publicKey]), 'a client trusting only the cache key accepts it');
  t.ok(verifyNarinfo(info.value, [upstreamKey.publicKey]), 'a client trusting only the upstream key accepts it');
});

t.test('absolute URLs: below the upstream made relative, elsewhere left alone', async (t) => {
  const below = adoptUpstreamNarinfo(narinfo({ url: 'http://up.example/cache/nar/x.nar' }), hash, upstream, cacheKey);
  t.match(below, { ok: true, text: new RegExp(`\nURL: upstream/${upstream.id}/${hash}/nar/x\\.nar\n`) });
  const elsewhere = adoptUpstreamNarinfo(narinfo({ url: 'https://cdn.example/nar/x.nar' }), hash, upstream, cacheKey);
  t.match(elsewhere, { ok: true, text: /\nURL: https:\/\/cdn\.example\/nar\/x\.nar\n/ });
});

t.test('refused: no or a wrong signature, another path, a tampered field, odd URLs, garbage', async (t) => {
  t.match(adoptUpstreamNarinfo(narinfo({}, null), hash, upstream, cacheKey), { ok: false, reason: /no valid signature by upstream-1/ });
  t.match(adoptUpstreamNarinfo(narinfo({}, SigningKey.generate('upstream-1')), hash, upstream, cacheKey), { ok: false, reason: /no valid signature/ });
  t.match(adoptUpstreamNarinfo(narinfo(), '2'.repeat(32), upstream, cacheKey), { ok: false, reason: /answered 2{32}\.narinfo with the narinfo of/ });
  const tampered = narinfo().replace('NarSize: 1234', 'NarSize: 1235');
  t.match(adoptUpstreamNarinfo(tampered, hash, upstream, cacheKey), { ok: false, reason: /no valid signature/ });
  t.match(adoptUpstreamNarinfo(narinfo({ url: '../../etc/passwd' }), hash, upstream, cacheKey), { ok: false, reason: /not a plain relative path/ });
  t.match(adoptUpstreamNarinfo('<html>not found</html>', hash, upstream, cacheKey), { ok: false, reason: /malformed/ });
  t.ok(VerifyingKey.parse(upstreamKey.publicKey.toString()).ok);
});

t.test('proxiable paths', async (t) => {
  for (const ok of ['nar/abc.nar.xz', 'nar/x', 'log/abc-hello.drv', 'a/b/c']) t.ok(isProxiablePath(ok), ok);
  for (const bad of ['', '/nar/x', 'nar/../x', '../x', 'nar//x', 'nar/.hidden', 'nar/x?y=1', 'a b', `n/${'x'.repeat(600)}`]) t.notOk(isProxiablePath(bad), bad);
});

t.test('Semaphore: at most `limit` at once, in arrival order', async (t) => {
  const s = new Semaphore(2);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const gates: (() => void)[] = [];
  const jobs = [0, 1, 2, 3, 4].map((i) => s.run(async () => {
    running++;
    most = Math.max(most, running);
    order.push(i);
    await new Promise<void>((resolve) => gates.push(resolve));
    running--;
  }));
  // one job released per read: the queued ones start only as running ones end
  await eventually(() => (gates.shift()?.(), order.length === 5), { interval: 1, message: 'all five jobs start' });
  gates.forEach((g) => g());
  await Promise.all(jobs);
  t.equal(most, 2);
  t.same(order, [0, 1, 2, 3, 4]);
  t.equal(s.inUse, 0);
  t.equal(s.queued, 0);
  t.throws(() => new Semaphore(0));
  await t.rejects(s.run(async () => { throw new Error('boom'); }), /boom/);
  t.equal(s.inUse, 0, 'a failing holder frees its place');
});
