// The pino logger with per-component levels (log.level.*), as JSON lines or, for a person at a
// terminal, as coloured readable lines (pino-pretty, run as a pino transport in a thread of its own).
import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { Level } from './kinds.js';
import type { Scope } from './naming.js';
import type { Config } from './registry.js';
import { ConfigError } from './configError.js';

export type Logger = PinoLogger;

export const serverLogComponents = ['cache', 'proto', 'scheduler', 'web'] as const;
export const workerLogComponents = ['build', 'eval', 'proto'] as const;
export type LogComponent = (typeof serverLogComponents)[number] | (typeof workerLogComponents)[number];

interface Levels {
  readonly fallback: Level;
  readonly components: ReadonlyMap<string, Level>;
}

/** Each root logger remembers the per-component levels it was made with, for componentLogger. */
const levelsOf = new WeakMap<Logger, Levels>();

/** Never in a log: credentials in whatever object a caller passes along. */
const redactedPaths = [
  'password', '*.password', 'token', '*.token', 'secret', '*.secret', 'authorization', '*.authorization',
  'cookie', '*.cookie', 'headers.authorization', 'headers.cookie', '*.headers.authorization', '*.headers.cookie',
];

function levelsFor(config: Config, scope: Scope): Levels {
  if (scope === 'worker') {
    return {
      fallback: config['worker.log.level.default'],
      components: new Map(workerLogComponents.map((c) => [c, config[`worker.log.level.${c}`] ?? config['worker.log.level.default']])),
    };
  }
  return {
    fallback: config['log.level.default'],
    components: new Map(serverLogComponents.map((c) => [c, config[`log.level.${c}`] ?? config['log.level.default']])),
  };
}

/** json: one JSON object a line (machines, files, journald); pretty: coloured lines for a terminal. */
export type LogFormat = 'json' | 'pretty';

/** `--log-format`: auto (the default) is pretty on a terminal and JSON anywhere else. */
export function logFormatFor(flag: string | undefined, isTty: boolean): LogFormat {
  if (flag === 'json' || flag === 'pretty') return flag;
  if (flag === undefined || flag === 'auto') return isTty ? 'pretty' : 'json';
  throw new ConfigError([`--log-format must be auto, json or pretty, not "${flag}"`]);
}

export interface LoggerOptions {
  /** Where lines go; stdout when absent. Tests pass a stream to read them back. */
  readonly destination?: DestinationStream;
  /** Fields on every line, in addition to pid and hostname. */
  readonly base?: object;
  /** The worker logs with worker.log.level.*; the server with log.level.*. */
  readonly scope?: Scope;
  /** pretty: to stdout through pino-pretty (ignored with a destination); json by default */
  readonly format?: LogFormat;
}

export function createLogger(config: Config, options: LoggerOptions = {}): Logger {
  const levels = levelsFor(config, options.scope ?? 'server');
  const settings = {
    level: levels.fallback,
    base: { pid: process.pid, hostname: hostname(), ...options.base },
    redact: { paths: redactedPaths, censor: '[secret]' },
    // Children remember the levels too: the worker takes its components' loggers from a child
    // (its worker id on every line), which otherwise fell back to the default level.
    onChild: (child: Logger) => void levelsOf.set(child, levels),
  };
  const root = options.destination
    ? pino(settings, options.destination)
    : options.format === 'pretty'
      ? pino(settings, pino.transport({ target: 'pino-pretty', options: { destination: 1, colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }))
      : pino(settings);
  levelsOf.set(root, levels);
  return root;
}

/** A child logger for one component at that component's level (pino lets a child be more verbose than its parent). */
export function componentLogger(root: Logger, component: LogComponent): Logger {
  const levels = levelsOf.get(root);
  const level = levels?.components.get(component) ?? levels?.fallback ?? root.level;
  return root.child({ component }, { level });
}
