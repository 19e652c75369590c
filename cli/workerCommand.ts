// `kiln worker`: runs a worker process against a kiln server.
import type { Command } from 'commander';
import { createLogger, logFormatFor } from '../config/index.js';
import { configFromCommand, withConfigFlags } from './configSources.js';
import { version } from './version.js';

/** `kiln worker`: connects to worker.serverUrl and runs jobs until SIGTERM or SIGINT. */
export function workerCommand(program: Command): Command {
  const command = program.command('worker').description('run a build worker that connects to a kiln server over /proto')
    .option('--log-format <format>', 'auto (readable lines on a terminal, JSON otherwise), json or pretty', 'auto');
  withConfigFlags(command, 'worker').action(
    async (_opts, cmd: Command) => {
      const loaded = configFromCommand(cmd, 'worker');
      const format = logFormatFor(cmd.opts<{ logFormat: string }>().logFormat, process.stdout.isTTY === true);
      const log = createLogger(loaded.values, { scope: 'worker', format });
      for (const warning of loaded.warnings) log.warn(warning);
      // Everything this process and its git and Nix children create is owner-only: clones, scratch
      // files and Nix's fetcher cache hold tenants' sources (docs/worker.md). The store is unaffected:
      // Nix sets the modes of store paths itself.
      process.umask(0o077);
      const { startWorker } = await import('../worker/index.js'); // loaded only for `worker`
      const worker = await startWorker(loaded.values, { log, software: `kiln ${version}` });
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal }, 'stopping the worker');
        worker.stop().then(
          () => process.exit(process.exitCode ?? 0),
          () => process.exit(1),
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    },
  );
  return command;
}
