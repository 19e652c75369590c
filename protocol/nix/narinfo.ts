// Text in, value out. No I/O, config, clock or logger, so the server, the CLI and workers all
// share it. The format is Nix's (libstore/nar-info.cc): "Key: value" lines ending in LF.
import { parseContentAddress } from './contentAddress.js';
import { formatHash, parseHash, type HashAlgorithm } from './hash.js';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';
import { DEFAULT_STORE_DIR, parseStorePath, parseStorePathBaseName } from './storePath.js';

export interface Narinfo {
  /** The full store path, e.g. /nix/store/…-hello-2.12. */
  storePath: string;
  url: string;
  compression: string;
  /** `<algo>:<nix32>` of the file at `url` (Nix never checks it). */
  fileHash?: string;
  fileSize?: number;
  /** `sha256:<nix32>` of the uncompressed NAR. */
  narHash: string;
  narSize: number;
  /** Base names (`<hash>-<name>`), as the narinfo writes them. */
  references: string[];
  /** Base name of the .drv; absent when unknown. */
  deriver?: string;
  system?: string;
  sigs: string[];
  /** Content address, `fixed:r:sha256:<nix32>`, `fixed:sha256:…` or `text:sha256:…`. */
  ca?: string;
}

export type { Parsed } from './parsed.js';

const SIZE = /^\d{1,16}$/;
const SIG = /^[^\s:]+:[A-Za-z0-9+/]+={0,2}$/;
/** Fields Nix reads once; a second copy would be silently ignored or mixed in by some reader. */
const SINGLE = new Set(['StorePath', 'URL', 'Compression', 'FileHash', 'FileSize', 'NarHash', 'NarSize', 'References', 'Deriver', 'System', 'CA']);

function parseSize(value: string | undefined, field: string, required: boolean): Parsed<number | undefined> {
  if (value === undefined) return required ? parseFailure(field, 'missing') : parsedOk(undefined);
  if (!SIZE.test(value) || !Number.isSafeInteger(Number(value))) return parseFailure(field, `not a byte count: ${JSON.stringify(value)}`);
  return parsedOk(Number(value));
}

function parseHashField(value: string | undefined, field: string, algorithm?: HashAlgorithm): Parsed<string | undefined> {
  if (value === undefined) return parsedOk(undefined);
  const hash = parseHash(value, algorithm, field);
  return hash.ok ? parsedOk(formatHash(hash.value)) : hash;
}

/** Parses a narinfo; strict about the fields Nix needs, tolerant of unknown fields and order. */
export function parseNarinfo(text: string, storeDir = DEFAULT_STORE_DIR): Parsed<Narinfo> {
  if (text.includes('\r')) return parseFailure('line', 'carriage return found: narinfo lines end in LF, not CRLF');
  const fields = new Map<string, string>();
  const sigs: string[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon < 1) return parseFailure('line', `expected "Key: value", got ${JSON.stringify(line.slice(0, 60))}`);
    const key = line.slice(0, colon);
    const rest = line.slice(colon + 1);
    if (rest !== '' && !rest.startsWith(' ')) return parseFailure(key, 'expected a space after the colon');
    const value = rest.slice(1);
    if (key === 'Sig') {
      if (!SIG.test(value)) return parseFailure('Sig', `expected "<key name>:<base64>", got ${JSON.stringify(value.slice(0, 60))}`);
      sigs.push(value);
    } else if (SINGLE.has(key)) {
      if (fields.has(key)) return parseFailure(key, 'appears more than once');
      fields.set(key, value);
    }
    // Unknown fields are skipped, as Nix does, so newer writers can add some.
  }

  const storePathText = fields.get('StorePath');
  if (storePathText === undefined) return parseFailure('StorePath', 'missing');
  const storePath = parseStorePath(storePathText, storeDir, 'StorePath');
  if (!storePath.ok) return storePath;
  const url = fields.get('URL');
  if (!url) return parseFailure('URL', 'missing');
  const narHashText = fields.get('NarHash');
  if (narHashText === undefined) return parseFailure('NarHash', 'missing');
  const narHash = parseHashField(narHashText, 'NarHash', 'sha256');
  if (!narHash.ok) return narHash;
  const narSize = parseSize(fields.get('NarSize'), 'NarSize', true);
  if (!narSize.ok) return narSize;
  if (narSize.value === 0) return parseFailure('NarSize', 'must be positive; no NAR is empty');
  const fileHash = parseHashField(fields.get('FileHash'), 'FileHash');
  if (!fileHash.ok) return fileHash;
  const fileSize = parseSize(fields.get('FileSize'), 'FileSize', false);
  if (!fileSize.ok) return fileSize;

  const references = (fields.get('References') ?? '').split(' ').filter((r) => r !== '');
  for (const ref of references) {
    const parsed = parseStorePathBaseName(ref, storeDir, 'References');
    if (!parsed.ok) return parsed;
  }
  let deriver = fields.get('Deriver');
  // Old Nix wrote this placeholder instead of leaving the line out.
  if (deriver === 'unknown-deriver' || deriver === '') deriver = undefined;
  if (deriver !== undefined) {
    const parsed = parseStorePathBaseName(deriver, storeDir, 'Deriver');
    if (!parsed.ok) return parsed;
  }
  const caText = fields.get('CA');
  const ca = caText === undefined || caText === '' ? undefined : parseContentAddress(caText);
  if (ca && !ca.ok) return ca;

  const info: Narinfo = {
    storePath: storePathText,
    url,
    // Nix's default when the line is missing, from the days when every NAR was bzip2'd.
    compression: fields.get('Compression') || 'bzip2',
    narHash: narHash.value!,
    narSize: narSize.value!,
    references,
    sigs,
  };
  if (fileHash.value !== undefined) info.fileHash = fileHash.value;
  if (fileSize.value !== undefined) info.fileSize = fileSize.value;
  if (deriver !== undefined) info.deriver = deriver;
  const system = fields.get('System');
  if (system) info.system = system;
  if (ca?.ok) info.ca = ca.value;
  return parsedOk(info);
}

/** Sorted and without duplicates, as Nix's std::set prints them. */
export const sortedUnique = (values: readonly string[]): string[] => [...new Set(values)].sort();

/** The narinfo text in Nix's field order with LF endings; `References: ` even when empty. */
export function renderNarinfo(info: Narinfo): string {
  const lines = [`StorePath: ${info.storePath}`, `URL: ${info.url}`, `Compression: ${info.compression}`];
  if (info.fileHash !== undefined) lines.push(`FileHash: ${info.fileHash}`);
  if (info.fileSize !== undefined) lines.push(`FileSize: ${info.fileSize}`);
  lines.push(`NarHash: ${info.narHash}`, `NarSize: ${info.narSize}`, `References: ${sortedUnique(info.references).join(' ')}`);
  if (info.deriver !== undefined) lines.push(`Deriver: ${info.deriver}`);
  if (info.system !== undefined) lines.push(`System: ${info.system}`);
  for (const sig of sortedUnique(info.sigs)) lines.push(`Sig: ${sig}`);
  if (info.ca !== undefined) lines.push(`CA: ${info.ca}`);
  return `${lines.join('\n')}\n`;
}
