import t from 'tap';
import { join } from 'node:path';
import { signUp } from '../../support/accounts.js';
import { testDatabase } from '../../support/db.js';
import { openLive, startEventKiln } from '../../support/events.js';

// Two server processes (two kilns, each with its own bus) on one database: each one's firehose
// shows the other's events, through Redis pub/sub when redis.url is set, through PostgreSQL
// LISTEN/NOTIFY otherwise.

const REDIS_URL = process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const E = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';

for (const transport of ['postgres', 'redis'] as const) {
  t.test(`two servers on one database see each other's events (${transport})`, async (t) => {
    const database = await testDatabase(t);
    const overrides = { 'redis.url': transport === 'redis' ? REDIS_URL : null };
    const a = await startEventKiln(t, { database, overrides });
    // The second process shares the first one's generated keys, as docs/auth.md shows.
    const keys = { 'secrets.cryptFile': join(a.baseDir, 'secrets', 'crypt.key'), 'secrets.jwtFile': join(a.baseDir, 'secrets', 'jwt.key') };
    const b = await startEventKiln(t, { database, overrides: { ...overrides, ...keys } });
    t.equal(a.events.bus.transport, transport);
    const ada = await signUp(a, 'ada');
    const onA = await openLive(a, '/metrics/events?events=worker.*,user.*', ada.token);
    const onB = await openLive(b, '/metrics/events?events=worker.*,user.*', ada.token);
    t.teardown(() => {
      onA.close();
      onB.close();
    });
    a.events.events.publish('worker.connected', { worker: E, name: 'from-a' });
    await a.events.events.transaction(async (_tx, emit) => emit('user.create', { user: 'made-on-a', user_id: E }));
    b.events.events.publish('worker.disconnected', { worker: E, name: 'from-b' });
    await onB.waitFor(3);
    await onA.waitFor(3);
    const seen = (c: typeof onA) => c.frames.map((f) => `${f.event} ${String(f.content['name'] ?? f.content['user'])}`).sort();
    const all = ['user.create made-on-a', 'worker.connected from-a', 'worker.disconnected from-b'];
    t.same(seen(onB), all, 'B sees A’s live and durable events and its own');
    t.same(seen(onA), all, 'A sees B’s event and its own');
    t.equal(onA.frames.filter((f) => f.event === 'worker.connected').length, 1, 'nobody sees an event twice');
  });
}
