// The live log inside the process that receives it: bytes not yet stored come from BuildLogs' tail,
// stored chunks from the database, and the reader joins them by byte offset without a gap or a
// repeat. The feed's poll is set far out, so only notifications can move the stream along.
import t from 'tap';
import { BuildLogFeed, BuildLogs, type BuildView } from '../../../services/index.js';
import { buildLogStreams } from '../../../services/builds/buildLogStreams.js';
import { anonymous } from '../../../services/index.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';

t.test('a live log from the tail and the stored chunks, exactly once', async (t) => {
  const { sql } = await testDatabase(t);
  const projectId = await insertProject(sql, 'acme', 'web');
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const [evaluation] = await sql<{ id: string }[]>`insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', '*', 'building') returning id`;
  const [drv] = await sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-a.drv', 'a', 'x86_64-linux', '{}') returning id`;
  const [db] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${drv!.id}, 'started', 1) returning id`;
  const [build] = await sql<{ id: string }[]>`insert into builds (evaluation_id, derivation_build_id) values (${evaluation!.id}, ${db!.id}) returning id`;

  const feed = new BuildLogFeed(3_600_000);
  t.teardown(() => feed.close());
  const logs = new BuildLogs(sql, 64, (id) => feed.notify(id));
  const view = { build_id: build!.id, derivation_build: db!.id, evaluation_id: evaluation!.id } as BuildView;
  const streams = buildLogStreams({
    sql, feed, logs,
    evaluations: { visible: async () => { throw new Error('not used'); } },
    views: { build: async () => view },
  });

  const lines = Array.from({ length: 40 }, (_, i) => `line ${i} of the build log\n`);
  let received = '';
  const it = (await streams.live(anonymous, build!.id))[Symbol.asyncIterator]();
  const readUntil = async (length: number) => {
    while (received.length < length) {
      const next = await it.next();
      if (next.done) throw new Error(`the stream ended after ${received.length} bytes`);
      received += Buffer.from(next.value).toString();
    }
  };

  logs.append(db!.id, 1, Buffer.from(lines[0]!));
  await readUntil(lines[0]!.length);
  t.equal(received, lines[0], 'below one chunk: served from memory');

  let sent = lines[0]!;
  for (const line of lines.slice(1)) {
    logs.append(db!.id, 1, Buffer.from(line));
    sent += line;
    await readUntil(sent.length);
  }
  await logs.finish(db!.id, 1);
  const [stored] = await sql<{ n: number }[]>`select count(*)::int as n from build_log_chunks where derivation_build_id = ${db!.id}`;
  t.ok(stored!.n > 5, `the log went through the database in ${stored!.n} chunks`);
  await sql`update derivation_builds set status = 'completed' where id = ${db!.id}`;
  feed.notify(db!.id);
  for (;;) {
    const next = await it.next();
    if (next.done) break;
    received += Buffer.from(next.value).toString();
  }
  t.equal(received, sent, 'every byte once, in order, then the end');
});
