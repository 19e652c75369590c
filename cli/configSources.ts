// Config flags on a subcommand and the configuration it loads from file, environment and flags.
import { Command, Option } from 'commander';
import { cliFlags, loadConfig, type LoadedConfig, type OptionPath } from '../config/index.js';

type Scope = 'server' | 'worker';

/** Adds --config and one flag per option of `scope` (a bool gets --x and --no-x). */
export function withConfigFlags(cmd: Command, scope: Scope): Command {
  cmd.option('--config <file>', 'JSON configuration file (below env variables and flags in precedence)');
  for (const f of cliFlags(scope)) {
    if (f.takesValue) cmd.addOption(new Option(`${f.flag} <${f.valueName ?? 'value'}>`, f.description));
    else {
      cmd.addOption(new Option(f.flag, f.description));
      cmd.addOption(new Option(f.negation ?? f.flag.replace(/^--/, '--no-'), `turn off ${f.flag}`).hideHelp());
    }
  }
  return cmd;
}

/** Loads the configuration from defaults, --config, SERVICE_* variables and the flags given. */
export function configFromCommand(cmd: Command, scope: Scope): LoadedConfig {
  const opts = cmd.opts<Record<string, unknown>>();
  const flags: Record<string, string | boolean> = {};
  for (const f of cliFlags(scope)) {
    const attribute = new Option(f.flag).attributeName();
    if (cmd.getOptionValueSource(attribute) !== 'cli') continue;
    const value = opts[attribute];
    if (typeof value === 'string' || typeof value === 'boolean') flags[f.path] = value;
  }
  return loadConfig({
    scope,
    env: process.env,
    flags: flags as Partial<Record<OptionPath, string | boolean>>,
    ...(typeof opts['config'] === 'string' ? { file: opts['config'] } : {}),
  });
}
