import t from 'tap';
import { signUp } from '../../../support/accounts.js';
import { startEventKiln } from '../../../support/events.js';

// The open_pr task action's settings on /tasks/{project}/{task}/actions (docs/git-hosts.md
// "open_pr"): a command and a branch (kiln/<task> by default), an optional author; malformed
// settings are refused by name and leave no row; open_pr actions receive no events.

interface OpenPrView { id: string; kind: string; command: string[]; branch: string; commit_name: string | null; commit_email: string | null; events: string[]; secret?: string }

t.test('open_pr actions: created with their defaults, edited, malformed settings refused with nothing written', async (t) => {
  const kiln = await startEventKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } });
  const base = '/tasks/web/default/actions';
  const put = (body: unknown) => kiln.api<OpenPrView>('PUT', base, { token: ada.token, body });

  const made = await put({ kind: 'open_pr', name: 'update inputs', command: ['nix', 'flake', 'update'] });
  t.equal(made.status, 200);
  t.match(made.message, { kind: 'open_pr', command: ['nix', 'flake', 'update'], branch: 'kiln/default', commit_name: null, commit_email: null, events: [] });
  t.notOk('secret' in made.message, 'an open_pr action has no signing secret');
  const named = await put({ kind: 'open_pr', name: 'bump', command: ['sh', '-c', 'date > stamp'], branch: 'bots/bump-1.2', commit_name: 'Kiln Bot', commit_email: 'bot@example.test' });
  t.match(named.message, { branch: 'bots/bump-1.2', commit_name: 'Kiln Bot', commit_email: 'bot@example.test' });

  const rows = async () => Number((await kiln.sql<{ n: string }[]>`select count(*) as n from task_actions`)[0]!.n);
  const before = await rows();
  const malformed: [string, unknown, RegExp][] = [
    ['no command', { kind: 'open_pr', name: 'x' }, /^command:/],
    ['an empty command', { kind: 'open_pr', name: 'x', command: [] }, /^command:/],
    ['an empty argument', { kind: 'open_pr', name: 'x', command: ['nix', ''] }, /^command\.1:/],
    ['a NUL in an argument', { kind: 'open_pr', name: 'x', command: ['nix\u0000'] }, /^command\.0: no NUL/],
    ['a command that is a string', { kind: 'open_pr', name: 'x', command: 'nix flake update' }, /^command:/],
    ['65 arguments', { kind: 'open_pr', name: 'x', command: Array.from({ length: 65 }, () => 'a') }, /^command:/],
    ['a branch with ..', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'a..b' }, /^branch:/],
    ['a branch starting with -', { kind: 'open_pr', name: 'x', command: ['true'], branch: '-f' }, /^branch:/],
    ['a branch ending .lock', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'main.lock' }, /^branch:/],
    ['a branch with a space', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'a b' }, /^branch:/],
    ['a branch with @{', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'a@{1}' }, /^branch:/],
    ['a branch ending /', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'kiln/' }, /^branch:/],
    ['a full ref', { kind: 'open_pr', name: 'x', command: ['true'], branch: 'refs/heads/x:refs/heads/main' }, /^branch:/],
    ['a two-line author', { kind: 'open_pr', name: 'x', command: ['true'], commit_name: 'a\nb' }, /^commit_name:/],
    ['an author with <', { kind: 'open_pr', name: 'x', command: ['true'], commit_name: 'a <b>' }, /^commit_name:/],
    ['a malformed e-mail', { kind: 'open_pr', name: 'x', command: ['true'], commit_email: 'not mail' }, /^commit_email:/],
    ['events', { kind: 'open_pr', name: 'x', command: ['true'], events: ['build.*'] }, /events/],
    ['a url', { kind: 'open_pr', name: 'x', command: ['true'], url: 'https://example.test/' }, /url/],
  ];
  for (const [what, body, message] of malformed) {
    const refused = await put(body);
    t.match(refused, { status: 400, code: 'invalid_body', message }, what);
  }
  t.equal(await rows(), before, 'no row written by a refused create');
  t.match(await put({ kind: 'open_pr', name: 'bump', command: ['true'] }), { status: 409, code: 'task_action_exists' });

  // A task whose name cannot stand in a branch needs one named.
  await kiln.api('PUT', '/tasks/web', { token: ada.token, body: { name: 'odd..name' } });
  t.match(await kiln.api('PUT', '/tasks/web/odd..name/actions', { token: ada.token, body: { kind: 'open_pr', name: 'x', command: ['true'] } }),
    { status: 400, code: 'invalid_body', message: 'branch: "kiln/odd..name" is not a branch name git takes; name one' });
  t.equal((await kiln.api('PUT', '/tasks/web/odd..name/actions', { token: ada.token, body: { kind: 'open_pr', name: 'x', command: ['true'], branch: 'kiln/odd' } })).status, 200);

  const patch = (id: string, body: unknown) => kiln.api<OpenPrView>('PATCH', `${base}/${id}`, { token: ada.token, body });
  const edited = await patch(made.message.id, { command: ['nix', 'flake', 'update', 'nixpkgs'], branch: 'kiln/nixpkgs', commit_name: 'Bot' });
  t.match(edited.message, { command: ['nix', 'flake', 'update', 'nixpkgs'], branch: 'kiln/nixpkgs', commit_name: 'Bot', commit_email: null });
  t.match((await patch(named.message.id, { commit_name: null })).message, { commit_name: null, commit_email: 'bot@example.test' }, 'null clears the action\'s own author');
  t.match(await patch(made.message.id, { events: ['build.*'] }), { status: 400, message: 'events: an open_pr action runs after each successful evaluation, not for events' });
  t.match(await patch(made.message.id, { branch: '../main' }), { status: 400, message: /^branch:/ });
  t.match(await patch(made.message.id, { command: [] }), { status: 400, message: /^command:/ });
  t.match(await patch(made.message.id, { to: ['a@example.test'] }), { status: 400, message: 'to: a open_pr action has no recipients' });
  t.match(await kiln.api('POST', `${base}/${made.message.id}/rotate-secret`, { token: ada.token }), { status: 409, code: 'no_signing_secret' });
  const mail = await kiln.api<{ id: string }>('PUT', base, { token: ada.token, body: { kind: 'send_mail', name: 'mail', to: ['ops@example.test'] } });
  t.match(await patch(mail.message.id, { command: ['true'] }), { status: 400, message: 'command: a send_mail action has no command' });
  t.match(await patch(mail.message.id, { commit_email: 'a@example.test' }), { status: 400, message: 'commit_email: a send_mail action has no commit email' });
  t.match((await kiln.api<OpenPrView>('GET', `${base}/${made.message.id}`, { token: ada.token })).message, { branch: 'kiln/nixpkgs', command: ['nix', 'flake', 'update', 'nixpkgs'] }, 'refused edits changed nothing');

  // Events for the task reach its other actions, never an open_pr one.
  const [ids] = await kiln.sql<{ task_id: string; project_id: string }[]>`select t.id as task_id, p.id as project_id from tasks t join projects p on p.id = t.project_id where t.name = 'default'`;
  const uuid = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';
  await kiln.events.events.transaction(async (_tx, emit) => {
    emit('build.queued', { build_id: uuid, derivation_build: uuid, evaluation_id: uuid, status: 'queued', task: 'default', project: 'acme/web', entry_point: true },
      { projectId: ids!.project_id, taskId: ids!.task_id, evaluationId: uuid, buildId: uuid });
  });
  const deliveries = await kiln.sql<{ kind: string }[]>`select a.kind from event_deliveries d join task_actions a on a.id = d.task_action_id`;
  t.same(deliveries.map((d) => d.kind), ['send_mail'], 'the event went to the send_mail action only');
});
