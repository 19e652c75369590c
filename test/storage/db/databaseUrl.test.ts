import t from 'tap';
import { describeTarget, nodePostgresOptions, parseDatabaseUrl } from '../../../storage/index.js';

t.test('the registry default: the local socket for role and database kiln', async (t) => {
  const target = parseDatabaseUrl('postgres://kiln@/kiln?host=/var/run/postgresql');
  t.match(target, { host: '/var/run/postgresql', port: 5432, user: 'kiln', database: 'kiln', password: undefined, params: {} });
  t.equal(describeTarget(target), 'the Unix socket /var/run/postgresql/.s.PGSQL.5432 (role "kiln", database "kiln")');
});

t.test('no host at all means /run/postgresql', async (t) => {
  t.equal(parseDatabaseUrl('postgresql:///kiln').host, '/run/postgresql');
});

t.test('a percent-encoded socket directory in the host part', async (t) => {
  t.equal(parseDatabaseUrl('postgres://kiln@%2Ftmp%2Fpg:5433/kiln').host, '/tmp/pg');
});

t.test('TCP with password, port, sslmode and a pass-through parameter', async (t) => {
  const target = parseDatabaseUrl('postgresql://ci:p%40ss:w@db.example:6543/builds?sslmode=require&options=-c%20statement_timeout%3D5000');
  t.match(target, { host: 'db.example', port: 6543, user: 'ci', password: 'p@ss:w', database: 'builds', sslmode: 'require' });
  t.same(target.params, { options: '-c statement_timeout=5000' });
  t.notMatch(describeTarget(target), /p@ss/, 'the password never appears in messages');
  t.same(nodePostgresOptions(target), {
    host: 'db.example', port: 6543, user: 'ci', password: 'p@ss:w', database: 'builds',
    ssl: { rejectUnauthorized: false }, options: '-c statement_timeout=5000',
  });
});

t.test('IPv6 and query parameters overriding the URL parts', async (t) => {
  t.match(parseDatabaseUrl('postgres://[::1]:5444/a'), { host: '::1', port: 5444, database: 'a' });
  t.equal(describeTarget(parseDatabaseUrl('postgres://[::1]:5444/a')), '[::1]:5444 (role "(operating system user)", database "a")');
  t.match(parseDatabaseUrl('postgres://h/a?user=u&password=p&dbname=b&port=7&host=h2'), { host: 'h2', port: 7, user: 'u', password: 'p', database: 'b' });
  t.equal(nodePostgresOptions(parseDatabaseUrl('postgres://h/a?sslmode=verify-full')).ssl, true);
  t.equal(nodePostgresOptions(parseDatabaseUrl('postgres://h/a')).ssl, false);
});

t.test('bad URLs fail naming the problem', async (t) => {
  t.throws(() => parseDatabaseUrl('mysql://x/y'), /database\.url: expected postgresql:\/\//);
  t.throws(() => parseDatabaseUrl('postgres://a,b/c'), /several hosts are not supported/);
  t.throws(() => parseDatabaseUrl('postgres://h:99999/c'), /port "99999" is not a port number/);
  t.throws(() => parseDatabaseUrl('postgres://h/c?sslmode=maybe'), /sslmode "maybe" is not one of/);
  t.throws(() => parseDatabaseUrl('postgres://u:%zz@h/c'), /the password is not valid percent-encoding/);
});
