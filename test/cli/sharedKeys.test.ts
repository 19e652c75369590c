import t from 'tap';
import { join } from 'node:path';
import { signUp } from '../support/accounts.js';
import { testDatabase } from '../support/db.js';
import { startEventKiln } from '../support/events.js';

// Several server processes on one database (docs/auth.md, "Several server processes"): a second
// process on another baseDir without the key files refuses to start, naming the options; given
// the first one's files it accepts its sessions (test/storage/instanceKeys.test.ts checks the sealed data).

t.test('a second server without the key files refuses; with them it shares the keys', async (t) => {
  const database = await testDatabase(t);
  const a = await startEventKiln(t, { database });
  const ada = await signUp(a, 'ada');
  await t.rejects(startEventKiln(t, { database }), { name: 'ConfigError', message: /secrets\.cryptFile is not set .* copy that process's key file/ });
  await t.rejects(
    startEventKiln(t, { database, overrides: { 'secrets.cryptFile': join(a.baseDir, 'secrets', 'crypt.key') } }),
    { name: 'ConfigError', message: /secrets\.jwtFile is not set/ },
    'each key is checked',
  );
  const b = await startEventKiln(t, {
    database, overrides: { 'secrets.cryptFile': join(a.baseDir, 'secrets', 'crypt.key'), 'secrets.jwtFile': join(a.baseDir, 'secrets', 'jwt.key') },
  });
  t.equal((await b.api('GET', '/user', { token: ada.token })).status, 200, 'a session from the first server is valid on the second');
  t.equal((await a.sql`select 1 from instance_secrets`).length, 0, 'no key in the database');
});
