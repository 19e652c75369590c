// Reading PostgreSQL's text arrays from raw bytes (services/builds/closureArrays.ts), as the
// build-time closure's whole-graph query returns them, against what PostgreSQL itself prints.
import t from 'tap';
import { uuidList, wholeNumbers } from '../../../services/builds/closureArrays.js';
import { testDatabase } from '../../support/db.js';

const { sql } = await testDatabase(t);

t.test('whole numbers and uuids as PostgreSQL prints them', async (t) => {
  const [row] = await sql`
    select array[0, 7, 42, 2147483647]::int[] as ints, array[0, 1000, 9007199254740991]::bigint[] as bigs, '{}'::int[] as empty,
      array['5e0b3c9a-8a2c-4b7e-9f00-0123456789ab', '00000000-0000-0000-0000-000000000000']::uuid[] as ids, '{}'::uuid[] as no_ids`.raw();
  const [ints, bigs, empty, ids, noIds] = row as unknown as Buffer[];
  t.same([...wholeNumbers(ints!)], [0, 7, 42, 2147483647]);
  t.same([...wholeNumbers(bigs!)], [0, 1000, 9007199254740991], 'bigint sizes up to 2^53 - 1, exactly');
  t.same([...wholeNumbers(empty!)], []);
  const list = uuidList(ids!);
  t.equal(list.length, 2);
  t.same([list.at(0), list.at(1)], ['5e0b3c9a-8a2c-4b7e-9f00-0123456789ab', '00000000-0000-0000-0000-000000000000']);
  t.equal(uuidList(noIds!).length, 0);
});

t.test('anything else is refused, not misread', async (t) => {
  t.throws(() => wholeNumbers(Buffer.from('{1,-2}')), /whole numbers/);
  t.throws(() => wholeNumbers(Buffer.from('{1.5}')), /whole numbers/);
  t.throws(() => wholeNumbers(Buffer.from('1,2')), /whole numbers/);
  t.throws(() => wholeNumbers(Buffer.from('{1,,2}')), /whole numbers/, 'an empty element');
  t.throws(() => wholeNumbers(Buffer.from('{1,}')), /whole numbers/, 'a trailing comma');
  t.throws(() => wholeNumbers(Buffer.from('{9007199254740993}')), /below 2\^53/, 'past 2^53: it would be rounded');
  t.throws(() => uuidList(Buffer.from('{"a b"}')), /uuids/);
  t.throws(() => uuidList(Buffer.from('{5e0b3c9a-8a2c-4b7e-9f00-0123456789ab,x}')), /uuids/);
});
