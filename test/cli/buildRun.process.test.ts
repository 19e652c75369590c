// `kiln build [dir]` end to end (issue 25 item 3): the CLI uploads a flake directory, the server
// evaluates the upload on a real `kiln worker` with real Nix, the build's log streams to stderr
// with its name in front of each line, the output path is printed, and --out-link realises it
// locally from the project's cache after the local copy was deleted. Also: a git work tree sends
// its tracked and unignored files only; an upload that is a single file, or has no flake.nix,
// fails its evaluation with why, and so does restarting one whose upload is gone; someone else's
// upload, an unknown one and a bad body are refused.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { spawnWorker } from '../support/workerProcess.js';
import { requireNix } from '../support/nixStore.js';
import { eventually } from '../support/eventually.js';
import { kilnCli, cliProject } from '../support/kilnCli.js';

requireNix();

const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 240_000);

/** packages.default copies `data` (a file of the upload) into its output. */
const flake = (nonce: string) => `{
  outputs = { self }: {
    packages.x86_64-linux.default = derivation {
      name = "kiln-upload-hello"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/bin:/usr/bin"; nonce = "${nonce}";
      args = [ "-c" "echo building from the upload; echo second line; cp \${./data} $out" ];
    };
  };
}
`;

interface BuildResult { evaluation: string; phase: string; builds: { status: string; outputs: Record<string, string> }[]; links: string[] }

t.test('kiln build', { timeout: TIMEOUT }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-cli-build-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': '{ outputs = { self }: { }; }\n' });
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => worker.stop());
  const ada = await signUp(kiln, 'ada');
  const env = await cliProject(t, kiln, ada.token, work, repo.url);

  // a plain directory (no git): every file but result links
  const dir = join(work, 'src');
  mkdirSync(dir);
  const nonce = randomBytes(8).toString('hex');
  writeFileSync(join(dir, 'flake.nix'), flake(nonce));
  writeFileSync(join(dir, 'data'), `uploaded ${nonce}\n`);

  let output = '';
  await t.test('builds the upload on the farm, streaming its log and printing the output path', async (t) => {
    const run = await kilnCli(['build', dir, '--project', 'acme/app'], env);
    t.equal(run.status, 0, run.stderr);
    t.match(run.stderr, /^kiln-upload-hello> building from the upload$/m, 'the log, each line prefixed like nix build -L');
    t.match(run.stderr, /^kiln-upload-hello> second line$/m);
    output = run.stdout.trim();
    t.match(output, /^\/nix\/store\/[0-9a-z]{32}-kiln-upload-hello$/);
    t.equal(readFileSync(output, 'utf8'), `uploaded ${nonce}\n`, 'built from the uploaded data file');
  });

  await t.test('--out-link realises the output from the project\'s cache', async (t) => {
    // the local copy goes, so the link can only come from the cache
    execFileSync('nix-store', ['--delete', output], { stdio: 'ignore' });
    t.notOk(existsSync(output));
    const link = join(work, 'result');
    const run = await kilnCli(['build', dir, '--project', 'acme/app', '--out-link', link, '--json'], env);
    t.equal(run.status, 0, run.stderr);
    const result = run.json as BuildResult;
    t.match(result, { phase: 'completed', builds: [{ status: /^(completed|substituted)$/, outputs: { out: output } }], links: [link] });
    t.equal(readlinkSync(link), output);
    t.equal(readFileSync(link, 'utf8'), `uploaded ${nonce}\n`);
  });

  await t.test('restarting an evaluation whose upload is gone fails it with why, before any worker fetches', async (t) => {
    const [finished] = await kiln.sql<{ id: string; source_upload_id: string }[]>`
      select id, source_upload_id from evaluations where source_upload_id is not null and phase = 'completed' order by created_at desc limit 1`;
    t.ok(finished, 'a finished evaluation of an upload');
    // what the sweep of expired uploads does (services/builds/sourceUploads.ts): the row goes
    await kiln.sql`delete from source_uploads where id = ${finished!.source_upload_id}`;
    const restarted = await kiln.api<string>('POST', `/evals/${finished!.id}`, { token: ada.token, body: { method: 'restart' } });
    t.equal(restarted.status, 200, JSON.stringify(restarted.message));
    const evaluation = await eventually(async () => {
      const e = (await kiln.api<{ phase: string; error: string | null }>('GET', `/evals/${restarted.message}`, { token: ada.token })).message;
      return e.phase === 'failed' ? e : null;
    }, { timeout: TIMEOUT / 4, interval: 200, message: 'the restarted evaluation fails' });
    t.match(evaluation.error, /fetch_failed: the uploaded source is gone .*run kiln build again/);
  });

  await t.test('a git work tree sends tracked and unignored files, as they are on disk', async (t) => {
    const tree = createFlakeRepo(join(work, 'tree'), { 'flake.nix': flake(`${nonce}-git`), 'data': 'committed\n', '.gitignore': 'ignored\n' });
    writeFileSync(join(tree.dir, 'data'), 'changed, not committed\n');
    writeFileSync(join(tree.dir, 'ignored'), 'never sent\n');
    const run = await kilnCli(['build', tree.dir, '--project', 'acme/app', '--no-logs', '--json'], env);
    t.equal(run.status, 0, run.stderr);
    const out = (run.json as BuildResult).builds[0]!.outputs['out']!;
    t.equal(readFileSync(out, 'utf8'), 'changed, not committed\n');
    const [upload] = await kiln.sql<{ size: string }[]>`select size from source_uploads order by created_at desc limit 1`;
    t.ok(upload, 'the upload is recorded');
  });

  await t.test('an upload that is not a flake tree fails its evaluation with why', async (t) => {
    const tarOf = (entries: Record<string, string>) => {
      const d = mkdtempSync(join(work, 'tar-'));
      for (const [name, text] of Object.entries(entries)) writeFileSync(join(d, name), text);
      return gzipSync(execFileSync('tar', ['--create', '--file=-', '-C', d, ...Object.keys(entries)]));
    };
    for (const [what, body, reason] of [
      ['a single file', tarOf({ 'flake.nix': flake('single') }), /single file, not a directory/],
      ['no flake.nix', tarOf({ 'a.txt': 'a', 'b.txt': 'b' }), /flake\.nix/],
    ] as const) {
      const res = await fetch(`${kiln.url}/api/v1/build-requests/source?project=acme/app`, { method: 'POST', headers: { authorization: `Bearer ${ada.token}`, 'content-type': 'application/gzip' }, body });
      t.equal(res.status, 200, what);
      const upload = (await res.json()) as { message: { id: string } };
      const started = await kiln.api<string>('POST', `/build-requests/source/${upload.message.id}/evaluate`, { token: ada.token, body: {} });
      t.equal(started.status, 200, what);
      const evaluation = await eventually(async () => {
        const e = (await kiln.api<{ phase: string; error: string | null }>('GET', `/evals/${started.message}`, { token: ada.token })).message;
        return e.phase === 'failed' ? e : null;
      }, { timeout: TIMEOUT / 4, interval: 200, message: `the evaluation of ${what} fails` });
      t.match(evaluation.error, reason, what);
    }
  });

  await t.test('only the uploader evaluates an upload; unknown ids and bad bodies are refused', async (t) => {
    const bob = await signUp(kiln, 'bob');
    const [acme] = await kiln.sql<{ id: string }[]>`select id from organizations where name = 'acme'`;
    await kiln.sql`insert into organization_members (organization_id, user_id, role) values (${acme!.id}, ${bob.id}, 'Write')`;
    const [upload] = await kiln.sql<{ id: string }[]>`select id from source_uploads where created_by = ${ada.id} limit 1`;
    const before = await kiln.sql<{ n: number }[]>`select count(*)::int as n from evaluations`;
    const asBob = await kiln.api('POST', `/build-requests/source/${upload!.id}/evaluate`, { token: bob.token, body: {} });
    t.equal(asBob.status, 404, 'another member of the project does not evaluate ada\'s upload');
    const unknown = await kiln.api('POST', '/build-requests/source/00000000-0000-4000-8000-000000000000/evaluate', { token: ada.token, body: {} });
    t.equal(unknown.status, 404);
    const notUuid = await kiln.api('POST', '/build-requests/source/nope/evaluate', { token: ada.token, body: {} });
    t.equal(notUuid.status, 400);
    const badTask = await kiln.api('POST', `/build-requests/source/${upload!.id}/evaluate`, { token: ada.token, body: { task: '../x' } });
    t.equal(badTask.status, 400);
    const noTask = await kiln.api('POST', `/build-requests/source/${upload!.id}/evaluate`, { token: ada.token, body: { task: 'missing' } });
    t.equal(noTask.status, 404);
    const after = await kiln.sql<{ n: number }[]>`select count(*)::int as n from evaluations`;
    t.equal(after[0]!.n, before[0]!.n, 'no refused call wrote an evaluation');
  });

  await t.test('kiln build without --project is a usage error', async (t) => {
    const run = await kilnCli(['build', dir], env);
    t.equal(run.status, 2);
    t.match(run.stderr, /--project/);
  });
});
