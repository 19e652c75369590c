// The build page of a running build in real Chromium: a protocol-level worker (no Nix) takes the
// build's job and streams its log; the page shows each line as it arrives (live tail over
// POST /builds/{id}/log, follow mode keeping the newest line in view) and ends the log when the
// build completes. Then a closure past the API's 500-node cut (rows seeded with SQL) reads
// "Truncated" and draws 500 nodes.
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { subscribedProject } from '../support/subscribedProject.js';
import { handshake, testHello } from '../support/protoClient.js';
import { derivationNode, narHash } from '../support/derivationNodes.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';

t.test('a running build: live log tail, then a truncated closure', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const browser = await launchBrowser(t);
  const { page, problems } = await openPage(t, browser);
  await page.context().addInitScript({ content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(token)});` });

  const tail = derivationNode('kiln-ui-tail');
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200);
  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [tail.derivation], attributes: [
    { path: ['packages', 'x86_64-linux', 'tail'], drvPath: tail.drvPath, outputs: { out: tail.out } },
  ], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });
  const job = await worker.next('buildJob');
  worker.send({ t: 'jobAccepted', jobId: job.jobId });
  worker.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('first line of the tail\n'), droppedBytes: 0 });
  const [build] = await kiln.sql<{ id: string }[]>`
    select b.id from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
    where d.drv_path = ${tail.drvPath}`;

  t.test('the log grows while the page is open, following the newest line', async (t) => {
    await page.goto(`${kiln.url}/builds/${build!.id}`);
    await page.getByTestId('build-status').getByText('started').waitFor();
    const log = page.getByTestId('log');
    await log.getByText('first line of the tail').waitFor();
    await page.getByTestId('log-state').getByText(/streaming/).waitFor();

    // Many more lines than the view holds, a line cut across two chunks, and a colour; before the
    // last line, a colour left on and an escape cut off at a line's end, which the next line must not inherit.
    const lines = Array.from({ length: 400 }, (_, i) => `line ${i + 2} of the live tail`);
    const leaks = ['\x1b[31mred left on', 'after red \x1b[1mbold\x1b[0m', 'a cut escape \x1b[3', 'after a cut \x1b[1mescape\x1b[0m'];
    const text = `${lines.join('\n')}\n${leaks.join('\n')}\nthe last \x1b[32mgreen\x1b[0m line\n`;
    const half = text.length >> 1;
    worker.send({ t: 'buildLog', jobId: job.jobId, seq: 1, data: Buffer.from(text.slice(0, half)), droppedBytes: 0 });
    worker.send({ t: 'buildLog', jobId: job.jobId, seq: 2, data: Buffer.from(text.slice(half)), droppedBytes: 0 });
    const green = log.getByText('green', { exact: true });
    await green.waitFor();
    t.equal(await green.getAttribute('class'), 'ansi-green-fg', 'ANSI green becomes a class');
    t.ok(await page.getByLabel('Follow').isChecked(), 'follow mode stays on');
    t.equal(await log.getByText('first line of the tail').count(), 0, 'the first line scrolled out of the view (virtualised)');
    await page.getByTestId('log-state').getByText('406 lines').waitFor();
    t.equal(await log.getByText('red left on').getAttribute('class'), 'ansi-red-fg');
    t.equal(await log.getByText('after red').getAttribute('class'), null, 'a colour does not carry into the next line');
    t.equal(await log.getByText('after a cut').textContent(), 'after a cut escape', 'an escape cut at the end of a line does not reach the next');

    // Scrolling up stops following: a new line does not move the view.
    await log.evaluate((e) => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); });
    await log.getByText('first line of the tail').waitFor();
    t.notOk(await page.getByLabel('Follow').isChecked(), 'scrolling up turns follow off');
    worker.send({ t: 'buildLog', jobId: job.jobId, seq: 3, data: Buffer.from('written while the reader is at the top\n'), droppedBytes: 0 });
    await page.getByTestId('log-state').getByText('407 lines').waitFor();
    t.equal(await log.getByText('written while the reader is at the top').count(), 0, 'the view stays where the reader is');
    t.same(await seriousAccessibilityViolations(page), [], 'running build: no serious or critical axe violations');
    await screenshot(page, 'build-live-tail');

    // The build completes: the log ends and the status changes, without a reload.
    worker.send({ t: 'buildResult', jobId: job.jobId, drvPath: tail.drvPath, outputs: [
      { name: 'out', path: tail.out, narHash: narHash(), narSize: 100, references: [], deriver: tail.drvPath, ca: null },
    ], alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
    await page.getByTestId('log-state').getByText(/end of log/).waitFor();
    await page.getByTestId('build-status').getByText('completed').waitFor();
    await page.getByLabel('Follow').check();
    await log.getByText('written while the reader is at the top').waitFor();
  });

  t.test('a closure past 500 nodes is drawn cut, and says so', async (t) => {
    // An evaluation of the same project whose root derivation needs 520 others (a star: two layers).
    const { sql } = kiln;
    const [task] = await sql<{ id: string }[]>`select id from tasks where project_id = ${projectId} and name = 'default'`;
    const [evaluation] = await sql<{ id: string }[]>`
      insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', '*', 'completed') returning id`;
    const nodes = [derivationNode('kiln-ui-root'), ...Array.from({ length: 520 }, (_, i) => derivationNode(`kiln-ui-leaf-${i}`))];
    const drvs = await sql<{ id: string; drv_path: string }[]>`insert into derivations ${sql(nodes.map((n) => ({
      drv_path: n.drvPath, name: n.derivation.name, system: 'x86_64-linux', outputs: sql.json({ out: n.out }),
    })))} returning id, drv_path`;
    const idOf = new Map(drvs.map((d) => [d.drv_path, d.id]));
    const root = idOf.get(nodes[0]!.drvPath)!;
    await sql`insert into derivation_edges ${sql(nodes.slice(1).map((n) => ({ derivation_id: root, depends_on: idOf.get(n.drvPath)! })))}`;
    const [rootBuild] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${root}, 'completed', 1) returning id`;
    const [b] = await sql<{ id: string }[]>`
      insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${rootBuild!.id}, true, 'packages.root') returning id`;

    await page.goto(`${kiln.url}/builds/${b!.id}`);
    const summary = page.getByTestId('closure-summary');
    await summary.getByText(/521 nodes, 520 edges/).waitFor({ timeout: 60_000 });
    await page.getByTestId('closure-truncated').getByText('Truncated: the largest 500 of 521 nodes are drawn.').waitFor();
    await page.getByTestId('closure-node').nth(499).waitFor({ timeout: 60_000 });
    t.equal(await page.getByTestId('closure-node').count(), 500, 'the 500 nodes the API sent are drawn');
    await page.getByRole('heading', { name: 'Closure graph' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'build-closure-truncated');
  });

  t.test('no console errors or CSP violations on the way', async (t) => {
    t.same(problems, []);
  });
});
