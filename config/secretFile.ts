// Reading secrets from files (*File options), with a clear reason when a file is unreadable.
import { readFileSync } from 'node:fs';
import { ConfigError } from './configError.js';

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Whether a …File option's file can be read; the reason if not. Load time checks this, so a typo fails at start, not at first use. */
export function unreadableReason(file: string): string | undefined {
  try {
    readFileSync(file);
    return undefined;
  } catch (error) {
    return reason(error);
  }
}

/**
 * The secret a …File option names, without the trailing newline editors and `echo` add.
 * Read at the point of use, so a rotated secret is picked up by the next reader.
 */
export function readSecretFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError([`cannot read secret file ${file}: ${reason(error)}`]);
  }
  const secret = text.trim();
  if (secret === '') throw new ConfigError([`secret file ${file} is empty`]);
  return secret;
}
