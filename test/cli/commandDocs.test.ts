// docs/cli.md names every command of the `kiln` program, so a new command cannot go undocumented.
import t from 'tap';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { kilnProgram } from '../../cli/program.js';

/** The command paths users type: `cache nar list`, `org create`, … (a group alone is not one). */
function commandPaths(command: Command, prefix: string[] = []): string[] {
  return command.commands.flatMap((sub) => {
    const path = [...prefix, sub.name()];
    return sub.commands.length === 0 ? [path.join(' ')] : commandPaths(sub, path);
  });
}

t.test('docs/cli.md lists every command', async (t) => {
  const docs = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
  const paths = commandPaths(kilnProgram());
  t.ok(paths.length > 40, `${paths.length} commands`);
  for (const path of paths) t.match(docs, new RegExp(`\`${path}[ \`]`), `docs/cli.md names \`kiln ${path}\``);
});
