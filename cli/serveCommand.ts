// `kiln serve`: runs the server with the loaded configuration.
import type { Command } from 'commander';
import { createLogger, logFormatFor } from '../config/index.js';
import type { CrashPoints } from '../storage/index.js';
import { configFromCommand, withConfigFlags } from './configSources.js';

/**
 * KILN_TEST_HOLD_AT=<point>: the crash test's hold (storage/nars/crashPoints.ts). Finalize stops for
 * good at that point after a line on stderr, and the test kills the process there.
 */
function crashPointsFrom(env: NodeJS.ProcessEnv): CrashPoints | undefined {
  const held = env['KILN_TEST_HOLD_AT'];
  if (!held) return undefined;
  return async (point) => {
    if (point !== held) return;
    process.stderr.write(`kiln: holding at ${point}\n`);
    await new Promise<never>(() => undefined);
  };
}

/** `kiln serve`: runs until SIGTERM or SIGINT, then stops accepting, drains and closes. */
export function serveCommand(program: Command): void {
  const serve = program.command('serve').description('run the kiln server')
    .option('--state-file <file>', 'declarative state (users, organizations, projects, caches, …) applied at start; see docs/state.md')
    .option('--log-format <format>', 'auto (readable lines on a terminal, JSON otherwise), json or pretty', 'auto');
  withConfigFlags(serve, 'server').action(async (_opts, cmd: Command) => {
    const loaded = configFromCommand(cmd, 'server');
    const { stateFile, logFormat } = cmd.opts<{ stateFile?: string; logFormat: string }>();
    const log = createLogger(loaded.values, { format: logFormatFor(logFormat, process.stdout.isTTY === true) });
    const { startKiln } = await import('./kiln.js'); // the server stack loads only for `serve`
    const crashPoints = crashPointsFrom(process.env);
    // Signals are taken from the first moment: the server answers before startKiln has returned
    // (serving threads start after the main listener), and a SIGTERM then must still drain and stop,
    // not kill the process with threads holding their sockets.
    let requested: string | null = null;
    let stopNow: ((signal: string) => void) | null = null;
    const onSignal = (signal: string) => (stopNow ? stopNow(signal) : (requested ??= signal));
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    const kiln = await startKiln(loaded, { log, ...(stateFile === undefined ? {} : { stateFile }), ...(crashPoints ? { crashPoints } : {}) });
    // A process that ends while a serving thread still holds its listen socket dies in uWS's
    // native code (an assert, SIGABRT): on a fatal error the threads close their sockets and end
    // first (docs/http.md, "Shutdown"). Without threads, Node's own handling is left alone.
    const exitAfterThreads = (code: number) => void (kiln.servingThreads?.stop() ?? Promise.resolve()).finally(() => process.exit(code));
    if (kiln.servingThreads !== null) {
      process.on('uncaughtException', (error) => {
        kiln.log.fatal({ err: error }, 'uncaught exception; stopping');
        exitAfterThreads(1);
      });
    }
    // With error reports on, an unhandled rejection is reported before the process ends as Node
    // would have ended it.
    if (loaded.values['errorReport.enable']) {
      process.on('unhandledRejection', (reason) => {
        kiln.log.fatal({ err: reason }, 'unhandled promise rejection; stopping');
        kiln.errorReports.report(reason, { source: 'unhandled rejection' });
        void kiln.errorReports.flush().finally(() => exitAfterThreads(1));
      });
    }
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
    stopNow = stop;
    if (requested !== null) stop(requested);
  });
}
