// A store path argument of the client commands, as the hash part the API names paths by.
import { UsageError } from './clientOutput.js';

/** A store path's hash part, from the hash itself, a base name or a full store path. */
export function hashArgument(text: string): string {
  const base = text.slice(text.lastIndexOf('/') + 1);
  const hash = base.slice(0, 32);
  if (!/^[0-9a-df-np-sv-z]{32}$/.test(hash) || (base.length > 32 && base[32] !== '-')) {
    throw new UsageError(`${JSON.stringify(text)} is not a store path or the 32-character hash part of one`);
  }
  return hash;
}
