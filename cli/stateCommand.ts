// `kiln state`: the declarative state file (docs/state.md).
import type { Command } from 'commander';

/** `kiln state check FILE`: validates a state file (schema, references, secret files) without a database. */
export function stateCommand(program: Command): void {
  const state = program.command('state').description('the declarative state file (docs/state.md)');
  state
    .command('check')
    .description('validate a state file without touching the database')
    .argument('<file>', 'the state file (JSON)')
    .action(async (file: string) => {
      const { readStateFile } = await import('../services/index.js'); // loaded only for this command
      const s = readStateFile(file);
      process.stdout.write(
        `${file} is valid: ${s.users.length} users, ${s.organizations.length} organizations, ${s.projects.length} projects, ` +
          `${s.caches.length} caches, ${s.memberships.length} memberships, ${s.subscriptions.length} subscriptions, ${s.api_keys.length} API keys\n`,
      );
    });
}
