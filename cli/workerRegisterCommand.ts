// `kiln worker register <project>`: a worker peer token for a project (spec: POST
// /projects/{project}/workers), printed this once: the worker presents it on /proto.
import type { Command } from 'commander';
import type { NewWorkerRegistration } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { jsonOption, runClientCommand } from './clientOutput.js';
import { readStdin } from './prompt.js';
import { projectRef, segment } from './resourceArguments.js';

export function workerRegisterCommand(worker: Command): void {
  worker.command('register').description('register a worker peer token for a project; the token is printed this once').argument('<project>', '<org>/<project>, or the project\'s UUID')
    .option('--name <name>', 'a name to tell tokens apart')
    .option('--worker-id <uuid>', 'accept the token only from the worker with this id')
    .option('--endpoint <ws-url>', 'a discoverable worker\'s /proto URL: the server connects to it')
    .option('--server-token <token>', 'the token the server presents to that worker (needs --endpoint); - reads it from standard input, out of the process list')
    .addOption(jsonOption())
    .action(async (project: string, opts: { name?: string; workerId?: string; endpoint?: string; serverToken?: string; json?: boolean }) => runClientCommand(opts.json === true, async (out) => {
      const client = await connect();
      const body = {
        ...(opts.name === undefined ? {} : { name: opts.name }),
        ...(opts.workerId === undefined ? {} : { worker_id: opts.workerId }),
        ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
        ...(opts.serverToken === undefined ? {} : { server_token: opts.serverToken === '-' ? await readStdin() : opts.serverToken }),
      };
      const made = await client.call<NewWorkerRegistration>('POST', `/projects/${segment(await projectRef(client, project))}/workers`, { body });
      out.note(`registered worker token "${made.name}" (${made.id}); the token is shown only now (put it in the worker's peers file):`);
      out.result(made, (r) => r.token);
    }));
}
