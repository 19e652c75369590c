// The bound on a worker's own store (worker.storeRootMaxMb, worker/ownStoreCollector.ts), on a
// real Nix chroot store: past the bound, a build's end collects the store, but only once the
// builds under way have ended, and builds that arrive meanwhile wait for the collection; what a
// GC root holds survives; under the bound nothing is collected.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import t from 'tap';
import { OwnStoreCollector, storeBytes } from '../../worker/ownStoreCollector.js';
import { ownStoreEnv } from '../../worker/ownStore.js';
import { requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();

t.test('a worker\'s own store is collected between builds once it passes its bound', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'kiln-own-store-gc-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const root = join(work, 'store');
  const env = ownStoreEnv({ ...process.env, NIX_CONFIG: TEST_NIX_CONFIG }, root);
  const add = (name: string) => {
    const file = join(work, name);
    writeFileSync(file, `${name} ${randomBytes(8).toString('hex')}\n`);
    return execFileSync('nix-store', ['--add', file], { env }).toString().trim();
  };
  const valid = (path: string) => spawnSync('nix-store', ['--check-validity', path], { env }).status === 0;
  const log = pino({ level: 'silent' });

  t.test('past the bound: collected after the builds under way, before the next one', async (t) => {
    const received = add('received');
    const pinned = add('pinned');
    execFileSync('nix-store', ['--realise', '--add-root', join(work, 'roots', 'pinned'), pinned], { env });
    t.ok(valid(received) && valid(pinned));
    t.ok((await storeBytes(root)) > 0, 'the store is measured by its files');
    const beside: number[] = [];
    const collector: OwnStoreCollector = new OwnStoreCollector({ root, maxBytes: 0, env, log, collecting: () => beside.push(collector.building) });

    let release = () => {};
    const running = collector.hold(() => new Promise<void>((resolve) => (release = resolve)));
    await collector.hold(async () => undefined);
    await collector.checked;
    t.ok(collector.wanted, 'a build ended past the bound: a collection is wanted');
    t.ok(valid(received), 'but not beside a build under way');
    let next = false;
    const waiting = collector.hold(async () => {
      next = true;
      t.notOk(valid(received), 'the next build starts after the collection');
    });
    await new Promise((resolve) => setImmediate(resolve));
    t.notOk(next, 'a new build waits for the wanted collection');

    release();
    await running;
    await waiting;
    t.ok(next);
    await collector.settle();
    t.equal(collector.collections, 2, 'one collection for each build that ended past the bound');
    t.same(beside, [0, 0], 'no collection started beside a build');
    t.notOk(valid(received), 'what the store received is gone');
    t.ok(valid(pinned), 'what a GC root holds stays');
  });

  t.test('under the bound nothing is collected', async (t) => {
    const received = add('kept');
    const collector = new OwnStoreCollector({ root, maxBytes: 1024 * 1024 * 1024, env, log });
    await collector.hold(async () => undefined);
    await collector.checked;
    t.notOk(collector.wanted);
    t.equal(collector.collections, 0);
    t.ok(valid(received));
  });
});
