// An ImportPaths NAR (services/ssh/cachePaths.ts addExported) refused its permit for
// nar.maxUploadSize (UploadBusy) ends the session; its lease must end with it. Left suspended past
// its first MiB, the leased read would stay in NarLeases' set for good, never swept (it awaits no
// chunk), keeping the session's stream alive: a client repeating it grows the server's memory.
import t from 'tap';
import { UploadBusy, type NarIngest } from '../../../services/caches/index.js';
import { NarLeases } from '../../../services/ssh/narLeases.js';
import { cachePaths, type SessionStore } from '../../../services/ssh/cachePaths.js';
import { SessionEnds } from '../../../services/ssh/sessionErrors.js';
import type { NarStorage } from '../../../storage/index.js';
import { steppedClock } from '../../support/clock.js';

async function* pieces(count: number, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < count; i++) yield Buffer.alloc(size, 1);
}

t.test('an ImportPaths NAR refused its permit gives its lease back', async (t) => {
  const leases = new NarLeases({ idleSecs: 300, clock: steppedClock(new Date('2026-11-27T08:00:00Z')) });
  // No permit within upload.restWaitSecs: the budget's answer, the only part of the ingest reached.
  const ingest = { admitted: async () => { throw new UploadBusy(1); } } as unknown as NarIngest;
  const store: SessionStore = {
    who: { kind: 'user', userId: '00000000-0000-4000-8000-000000000001', username: 'ada' } as SessionStore['who'], project: null,
    cache: { id: 'c', name: 'main' }, canRead: true, writeTarget: { id: 'c', name: 'main', uploader: 'ada', owner: 'ada' },
  };
  const paths = cachePaths({ nars: {} as NarStorage, ingest, maxUploadSize: 8 << 20, leases }, store);
  const ended = await paths.addExported(pieces(8, 256 << 10), async () => { throw new Error('no trailer expected'); }).then(() => null, (e: unknown) => e);
  t.type(ended, SessionEnds, 'the session ends');
  t.equal(leases.holding, 0, 'no lease is left behind');
});
