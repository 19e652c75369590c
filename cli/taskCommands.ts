// `kiln task list <project>` and `kiln task evaluate <project> <task> [--commit] [--attr] [--watch]`
// (spec: "Projects and tasks"); the project is `org/project`, a UUID or a name one organization uses.
import type { Command } from 'commander';
import type { TaskView } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatDate, formatTable, jsonOption, runClientCommand } from './clientOutput.js';
import { watchEvaluation } from './evalWatch.js';
import { projectRef, segment } from './resourceArguments.js';

export function taskCommands(program: Command): void {
  const task = program.command('task').description('tasks: named evaluation targets of a project (every project has "default")');

  task.command('list').description('the tasks of a project').argument('<project>', '<org>/<project>, or the project\'s UUID').addOption(jsonOption())
    .action(async (project: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const tasks = await client.call<TaskView[]>('GET', `/tasks/${segment(await projectRef(client, project))}`);
      out.result(tasks, (ts) => formatTable(['TASK', 'BRANCH', 'WILDCARD', 'APPROVAL', 'STARS', 'CREATED'], ts.map((t) => [
        t.name, t.branch ?? '-', t.wildcard ?? '(project\'s)', t.requires_approval ? 'required' : '-', String(t.stars), formatDate(t.created_at),
      ])));
    }));

  task.command('evaluate').description('evaluate a task; prints the evaluation id').argument('<project>', '<org>/<project>, or the project\'s UUID').argument('<task>')
    .option('--commit <sha>', 'the full commit id (default: the head of the task\'s branch)')
    .option('--attr <path>', 'one attribute path (default: the task\'s wildcard)')
    .option('--watch', 'then follow it as `kiln eval watch` does (the exit status is the evaluation\'s)')
    .addOption(jsonOption())
    .action(async (project: string, name: string, opts: { commit?: string; attr?: string; watch?: boolean; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const body = { ...(opts.commit === undefined ? {} : { commit: opts.commit }), ...(opts.attr === undefined ? {} : { attr: opts.attr }) };
      const id = await client.call<string>('POST', `/tasks/${segment(await projectRef(client, project))}/${segment(name)}/evaluate`, { body });
      if (opts.watch) return void (await watchEvaluation(client, id, out));
      out.result({ evaluation: id }, (r) => r.evaluation);
    }));
}
