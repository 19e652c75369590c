// `kiln eval show|watch|abort <id>`: one evaluation (spec: "Evaluations and builds"); watch is in evalWatch.ts.
import type { Command } from 'commander';
import type { BuildView, EvaluationView } from '../protocol/index.js';
import type { ApiClient } from './apiClient.js';
import { connect } from './clientConnection.js';
import { jsonOption, runClientCommand, UsageError } from './clientOutput.js';
import { showEvaluation, showEvaluationWithBuilds, type EvaluationWithBuilds } from './evaluationText.js';
import { watchEvaluation } from './evalWatch.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** An evaluation or build id argument: a UUID, checked before anything is asked. */
export function uuidArgument(text: string, what: string): string {
  if (!UUID.test(text)) throw new UsageError(`${JSON.stringify(text)} is not ${what} id (a UUID)`);
  return text.toLowerCase();
}

async function evaluationWithBuilds(client: ApiClient, id: string): Promise<EvaluationWithBuilds> {
  const evaluation = await client.call<EvaluationView>('GET', `/evals/${id}`);
  return { evaluation, builds: await client.call<BuildView[]>('GET', `/evals/${id}/builds`) };
}

export function evalCommands(program: Command): void {
  const evaluation = program.command('eval').description('evaluations: a task\'s attributes at a commit, and their builds');

  evaluation.command('show').description('an evaluation and its builds').argument('<id>').addOption(jsonOption())
    .action(async (id: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const uuid = uuidArgument(id, 'an evaluation');
      out.result(await evaluationWithBuilds(await connect(), uuid), showEvaluationWithBuilds);
    }));

  evaluation.command('watch').description('follow an evaluation live until it ends; exits 1 when it failed, was aborted or has failed builds').argument('<id>').addOption(jsonOption())
    .action(async (id: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const uuid = uuidArgument(id, 'an evaluation');
      await watchEvaluation(await connect(), uuid, out);
    }));

  evaluation.command('abort').description('abort an evaluation: queued builds are dropped, running ones cancelled').argument('<id>').addOption(jsonOption())
    .action(async (id: string, opts: { json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const uuid = uuidArgument(id, 'an evaluation');
      const client = await connect();
      await client.call('POST', `/evals/${uuid}`, { body: { method: 'abort' } });
      out.result(await client.call<EvaluationView>('GET', `/evals/${uuid}`), showEvaluation);
    }));
}
