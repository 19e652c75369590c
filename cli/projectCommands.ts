// `kiln project list|show|create|delete|evaluate`: projects of an organization (spec: "Projects
// and tasks"). `project create --cache` subscribes the new project to caches, since an
// evaluation waits until its project has a writable cache.
import type { Command } from 'commander';
import type { ProjectDetails, ProjectView } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatDate, formatFields, formatTable, jsonOption, repeated, runClientCommand } from './clientOutput.js';
import { requireConfirmation } from './confirmation.js';
import { watchEvaluation } from './evalWatch.js';
import { orgProject, projectPath, segment } from './resourceArguments.js';

const MODES = ['read-write', 'read-only', 'write-only'];

const showDetails = (d: ProjectDetails): string => [
  formatFields([
    ['Project', `${d.project.organization}/${d.project.name}`],
    ['Id', d.project.id],
    ['Display name', d.project.display_name || '-'],
    ['Description', d.project.description || '-'],
    ['Repository', d.project.repository],
    ['Wildcard', d.project.wildcard],
    ['Default branch', d.project.default_branch ?? '-'],
    ['Polled every', d.project.poll_interval_secs === null ? 'not polled' : `${d.project.poll_interval_secs} s`],
    ['Active', d.project.active ? 'yes' : 'no'],
    ['Your role', d.project.role ?? '-'],
    ['Created', formatDate(d.project.created_at)],
  ]),
  '',
  formatTable(['TASK', 'BRANCH', 'WILDCARD', 'STARS'], d.tasks.map((t) => [t.name, t.branch ?? '-', t.wildcard ?? '(project\'s)', String(t.stars)])),
  '',
  d.subscriptions.subscriptions.length === 0 && d.subscriptions.requests.length === 0
    ? 'Caches: none (evaluations wait until the project has a writable cache: kiln project create --cache, or the web UI)'
    : formatTable(['CACHE', 'MODE', 'VIA'], [
      ...d.subscriptions.subscriptions.map((s) => [s.cache, MODES[s.mode] ?? String(s.mode), s.via]),
      ...d.subscriptions.requests.map((r) => [r.cache, MODES[r.mode] ?? String(r.mode), 'requested']),
    ]),
].join('\n');

export function projectCommands(program: Command): void {
  const project = program.command('project').description('projects: a repository evaluated at commits, built on the farm');

  project.command('list').description('the projects of an organization').argument('<org>').addOption(jsonOption())
    .action(async (org: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const projects = await (await connect()).call<ProjectView[]>('GET', `/projects/${segment(org)}`);
      out.result(projects, (ps) => formatTable(['PROJECT', 'REPOSITORY', 'ACTIVE', 'CREATED'], ps.map((p) => [`${p.organization}/${p.name}`, p.repository, p.active ? 'yes' : 'no', formatDate(p.created_at)])));
    }));

  project.command('show').description('a project with its tasks and caches').argument('<org/project>').addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const path = projectPath(orgProject(name));
      out.result(await (await connect()).call<ProjectDetails>('GET', `${path}/details`), showDetails);
    }));

  project.command('create').description('create a project in an organization').argument('<org/project>')
    .requiredOption('--repository <url>', 'the git repository holding the flake')
    .option('--wildcard <attrs>', 'the attribute paths to build, e.g. "packages.x86_64-linux.*"')
    .option('--branch <branch>', 'the default branch (default: the repository\'s HEAD)')
    .option('--display-name <text>')
    .option('--description <text>')
    .option('--cache <cache>', 'subscribe the project to this cache read-write (repeatable)', repeated, [] as string[])
    .addOption(jsonOption())
    .action(async (name: string, opts: { repository: string; wildcard?: string; branch?: string; displayName?: string; description?: string; cache: string[]; json?: boolean }) =>
      runClientCommand(opts.json === true, async (out) => {
        const { org, project: projectName } = orgProject(name);
        const client = await connect();
        const body = {
          name: projectName, repository: opts.repository,
          ...(opts.wildcard === undefined ? {} : { wildcard: opts.wildcard }),
          ...(opts.branch === undefined ? {} : { default_branch: opts.branch }),
          ...(opts.displayName === undefined ? {} : { display_name: opts.displayName }),
          ...(opts.description === undefined ? {} : { description: opts.description }),
        };
        const made = await client.call<ProjectView>('PUT', `/projects/${segment(org)}`, { body });
        const subscribed: { cache: string; answer: unknown }[] = [];
        try {
          for (const cache of opts.cache) {
            subscribed.push({ cache, answer: await client.call('POST', `/projects/${made.id}/subscribe/${segment(cache)}`, { body: { mode: 0 } }) });
          }
        } catch (e) {
          // All or nothing: a project without the caches asked for is taken back.
          await client.call('DELETE', `/projects/${segment(org)}/${segment(projectName)}`);
          if (e instanceof Error) e.message = `the project was not created: ${e.message}`;
          throw e;
        }
        out.result({ ...made, subscribed }, (p) => [
          `created project "${p.organization}/${p.name}" (${p.id})`,
          ...p.subscribed.map((s) => `cache "${s.cache}": ${typeof s.answer === 'string' ? s.answer : 'subscribed'}`),
        ].join('\n'));
      }));

  project.command('delete').description('delete a project with its evaluations').argument('<org/project>')
    .option('-y, --yes', 'do not ask for confirmation (required with --json)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { yes?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const path = projectPath(orgProject(name));
      const client = await connect();
      await requireConfirmation(`Delete project "${name}" with its evaluations?`, { yes: opts.yes === true, json: opts.json === true }, 'deleted');
      await client.call('DELETE', path);
      out.result({ project: name, deleted: true }, (r) => `deleted project "${r.project}"`);
    }));

  project.command('evaluate').description('evaluate the default task at the head of the default branch; prints the evaluation id').argument('<org/project>')
    .option('--watch', 'then follow it as `kiln eval watch` does (the exit status is the evaluation\'s)')
    .addOption(jsonOption())
    .action(async (name: string, opts: { watch?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const path = projectPath(orgProject(name));
      const client = await connect();
      const id = await client.call<string>('POST', `${path}/evaluate`);
      if (opts.watch) return void (await watchEvaluation(client, id, out));
      out.result({ evaluation: id }, (r) => r.evaluation);
    }));
}
