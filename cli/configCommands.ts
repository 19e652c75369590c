// `kiln config`: show the effective configuration with sources, and check a config file.
import type { Command } from 'commander';
import { checkConfigFile, describeConfig, renderConfig } from '../config/index.js';
import { configFromCommand, withConfigFlags } from './configSources.js';

/** `kiln config print` and `kiln config check FILE`. */
export function configCommands(program: Command): void {
  const config = program.command('config').description('inspect and check configuration');

  withConfigFlags(
    config
      .command('print')
      .description('print every effective option with its source (secrets masked)')
      .option('--worker', 'show the options of `kiln worker` instead of `kiln serve`'),
    'server',
  ).action((_opts, cmd: Command) => {
    const scope = cmd.opts()['worker'] ? 'worker' : 'server';
    const loaded = configFromCommand(cmd, scope);
    const rows = describeConfig(loaded).filter((r) => (scope === 'worker') === r.path.startsWith('worker.'));
    process.stdout.write(renderConfig(rows) + '\n');
    for (const w of loaded.warnings) process.stderr.write(`warning: ${w}\n`);
  });

  config
    .command('check')
    .description('validate a JSON configuration file without starting anything')
    .argument('<file>', 'the file to check')
    .option('--worker', 'check it as a `kiln worker` configuration')
    .action((file: string, opts: { worker?: boolean }) => {
      const problems = checkConfigFile(file, opts.worker ? 'worker' : 'server');
      if (problems.length === 0) {
        process.stdout.write(`${file}: ok\n`);
        return;
      }
      for (const p of problems) process.stderr.write(`${p}\n`);
      process.exitCode = 1;
    });
}
