// `kiln serve`: runs the server with the loaded configuration.
import type { Command } from 'commander';
import { configFromCommand, withConfigFlags } from './configSources.js';

/** `kiln serve`: runs until SIGTERM or SIGINT, then stops accepting, drains and closes. */
export function serveCommand(program: Command): void {
  const serve = program.command('serve').description('run the kiln server')
    .option('--state-file <file>', 'declarative state (users, organizations, projects, caches, …) applied at start; see docs/state.md');
  withConfigFlags(serve, 'server').action(async (_opts, cmd: Command) => {
    const loaded = configFromCommand(cmd, 'server');
    const stateFile = cmd.opts<{ stateFile?: string }>().stateFile;
    const { startKiln } = await import('./kiln.js'); // the server stack loads only for `serve`
    const kiln = await startKiln(loaded, stateFile === undefined ? {} : { stateFile });
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      kiln.log.info({ signal }, 'shutting down');
      kiln.stop().then(
        () => process.exit(process.exitCode ?? 0),
        () => process.exit(1),
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}
