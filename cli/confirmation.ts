// Asking before a destructive act: `-y/--yes` answers for the user; in JSON mode there is nobody
// to ask, so --yes is required (spec: "Client commands for cached NARs").
import { createInterface } from 'node:readline/promises';
import { UsageError } from './clientOutput.js';

export async function confirm(question: string, opts: { yes: boolean; json: boolean }): Promise<boolean> {
  if (opts.yes) return true;
  if (opts.json) throw new UsageError('--yes is required with --json: there is no one to ask for confirmation', 'confirmation_required');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    // An input that ends without an answer (a closed pipe) means no.
    const closed = new Promise<string>((resolve) => rl.once('close', () => resolve('')));
    const answer = await Promise.race([rl.question(`${question} [y/N] `), closed]);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** confirm(), or a refusal saying what was not done (`deleted`, `rotated`, …) and how to skip the question. */
export async function requireConfirmation(question: string, opts: { yes: boolean; json: boolean }, notDone: string): Promise<void> {
  if (!(await confirm(question, opts))) throw new UsageError(`not ${notDone}: not confirmed (pass --yes to skip the question)`, 'not_confirmed');
}
