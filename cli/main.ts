// The `kiln` command line: parses the process's arguments with the program of cli/program.ts.
import { ConfigError } from '../config/index.js';
import { kilnProgram } from './program.js';

const program = kilnProgram();

try {
  await program.parseAsync(process.argv);
} catch (e) {
  // Configuration problems are the operator's to fix: say what, not where in kiln.
  if (e instanceof ConfigError) {
    process.stderr.write(`kiln: invalid configuration:\n${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`kiln: ${e instanceof Error ? e.message : String(e)}\n`);
  if (e instanceof Error && e.cause) process.stderr.write(`  cause: ${e.cause instanceof Error ? e.cause.message : String(e.cause)}\n`);
  process.exit(1);
}
