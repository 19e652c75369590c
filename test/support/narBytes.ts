// Hand-made NAR bytes for tests of what a NAR writer never produces (entries out of order, names
// repeated): a directory of regular files with its entries in the order given.
import { encodeNarStrings } from '../../protocol/index.js';

const regular = (contents: Uint8Array): Uint8Array[] => [encodeNarStrings('(', 'type', 'regular', 'contents'), encodeNarStrings(contents), encodeNarStrings(')')];

/** A directory NAR with its entries as given: canonical only when the names are sorted and distinct. */
export const directoryNar = (entries: [string, Uint8Array][]): Buffer =>
  Buffer.concat([
    encodeNarStrings('nix-archive-1', '(', 'type', 'directory'),
    ...entries.flatMap(([name, contents]) => [encodeNarStrings('entry', '(', 'name', name, 'node'), ...regular(contents), encodeNarStrings(')')]),
    encodeNarStrings(')'),
  ]);
