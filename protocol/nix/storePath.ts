// Store paths: `<storeDir>/<hash part>-<name>`, where the hash part is 32 nix32 characters
// (160 bits) and the name follows Nix's rules (libstore/path.cc): 1 to 211 characters from
// [A-Za-z0-9+-._?=]. 211 keeps the whole base name within 255 bytes.
import { isNix32 } from './nix32.js';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

export const DEFAULT_STORE_DIR = '/nix/store';
export const STORE_PATH_HASH_LENGTH = 32;
export const STORE_PATH_NAME_MAX = 211;

export interface StorePath {
  /** e.g. `/nix/store` (no trailing slash). */
  storeDir: string;
  /** The 32-character nix32 hash part, which is also the narinfo's file name. */
  hashPart: string;
  name: string;
}

const NAME_CHAR = /^[A-Za-z0-9+\-._?=]+$/;

/** Why `name` cannot be a store path name, or undefined when it can. */
export function storePathNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'the name is empty';
  if (name.length > STORE_PATH_NAME_MAX) return `the name is ${name.length} characters long (at most ${STORE_PATH_NAME_MAX})`;
  if (!NAME_CHAR.test(name)) {
    const bad = [...name].find((c) => !NAME_CHAR.test(c)) ?? '';
    return `the name contains ${JSON.stringify(bad)}; allowed are A-Z a-z 0-9 + - . _ ? =`;
  }
  // Newer Nix refuses these outright; no builder can produce them as a file name anyway.
  if (name === '.' || name === '..') return `the name is ${JSON.stringify(name)}`;
  return undefined;
}

/** Parses `<hash part>-<name>`, the form narinfo References and Deriver use. */
export function parseStorePathBaseName(baseName: string, storeDir = DEFAULT_STORE_DIR, field = 'storePath'): Parsed<StorePath> {
  const hashPart = baseName.slice(0, STORE_PATH_HASH_LENGTH);
  if (baseName.length < STORE_PATH_HASH_LENGTH + 2 || baseName[STORE_PATH_HASH_LENGTH] !== '-') {
    return parseFailure(field, `expected "<32 nix32 characters>-<name>", got ${JSON.stringify(baseName)}`);
  }
  if (!isNix32(hashPart)) {
    return parseFailure(field, `the hash part ${JSON.stringify(hashPart)} has characters outside nix32 (0-9 a-z without e o u t)`);
  }
  const name = baseName.slice(STORE_PATH_HASH_LENGTH + 1);
  const problem = storePathNameProblem(name);
  if (problem) return parseFailure(field, `${JSON.stringify(baseName)}: ${problem}`);
  return parsedOk({ storeDir, hashPart, name });
}

/** Parses a full store path such as `/nix/store/…-hello-2.12`; it must be directly in `storeDir`. */
export function parseStorePath(path: string, storeDir = DEFAULT_STORE_DIR, field = 'storePath'): Parsed<StorePath> {
  const prefix = `${storeDir}/`;
  if (!path.startsWith(prefix)) return parseFailure(field, `${JSON.stringify(path)} is not in the store directory ${storeDir}`);
  const baseName = path.slice(prefix.length);
  if (baseName.includes('/')) return parseFailure(field, `${JSON.stringify(path)} is a path inside a store path, not a store path`);
  return parseStorePathBaseName(baseName, storeDir, field);
}

export const storePathBaseName = (p: StorePath): string => `${p.hashPart}-${p.name}`;
export const printStorePath = (p: StorePath): string => `${p.storeDir}/${p.hashPart}-${p.name}`;

/** True for a 32-character nix32 string, the key of `<hash>.narinfo` requests. */
export const isStorePathHashPart = (text: string): boolean => text.length === STORE_PATH_HASH_LENGTH && isNix32(text);

const lastSegment = (path: string): string => path.slice(path.lastIndexOf('/') + 1);

/**
 * The hash part of a store path or base name that was parsed on its way in (`/nix/store/<hash>-hello`
 * → `<hash>`): the first 32 characters of its last segment. Not a check: untrusted text goes
 * through parseStorePath, and what this returns for anything else is merely not a hash part.
 */
export const storePathHashPart = (path: string): string => lastSegment(path).slice(0, STORE_PATH_HASH_LENGTH);

/** The name of a parsed store path or base name (`/nix/store/<hash>-hello-2.12` → `hello-2.12`). */
export const storePathName = (path: string): string => lastSegment(path).slice(STORE_PATH_HASH_LENGTH + 1);
