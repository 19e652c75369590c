// The `kiln` command line: every subcommand registered on one commander program (cli/main.ts
// parses the process's arguments with it; a test checks docs/cli.md names every command).
import { Command } from 'commander';
import { cacheCommands } from './cacheCommands.js';
import { configCommands } from './configCommands.js';
import { adminCommands } from './gcCommands.js';
import { loginCommand } from './loginCommand.js';
import { migrateCommand } from './migrateCommand.js';
import { serveCommand } from './serveCommand.js';
import { stateCommand } from './stateCommand.js';
import { version } from './version.js';
import { workerCommand } from './workerCommand.js';
import { workerRegisterCommand } from './workerRegisterCommand.js';
import { orgCommands } from './orgCommands.js';
import { projectCommands } from './projectCommands.js';
import { taskCommands } from './taskCommands.js';
import { evalCommands } from './evalCommands.js';
import { buildCommands } from './buildCommands.js';
import { keyCommands } from './keyCommands.js';
import { webhookCommands } from './webhookCommands.js';
import { pushCommands } from './pushCommands.js';

export function kilnProgram(): Command {
  const program = new Command('kiln')
    .description('kiln: a Nix CI server and multi-tenant Nix binary cache')
    .version(version)
    .showHelpAfterError()
    // Bad usage commander finds (a missing argument, an unknown option) exits 2 like kiln's own
    // usage errors (cli/clientOutput.ts); help and --version exit 0. Subcommands inherit this.
    .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));

  serveCommand(program);
  workerRegisterCommand(workerCommand(program));
  configCommands(program);
  migrateCommand(program);
  stateCommand(program);
  loginCommand(program);
  cacheCommands(program);
  orgCommands(program);
  projectCommands(program);
  taskCommands(program);
  evalCommands(program);
  buildCommands(program);
  keyCommands(program);
  webhookCommands(program);
  pushCommands(program);
  adminCommands(program);
  return program;
}
