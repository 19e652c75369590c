// The `.ls` file listing of a NAR, as `nix copy --to 'file://…?write-nar-listing=true'` writes
// it: {"version":1,"root":node}, where a node is a regular file (size, executable only when
// true, narOffset of its first byte), a directory (entries by name) or a symlink (target).
// Built in the same pass that reads the NAR, and rendered byte for byte as Nix 2.8 does.
import type { NarVisitor } from './narParser.js';

export interface NarListingRegular {
  type: 'regular';
  size: number;
  executable?: true;
  narOffset: number;
}
export interface NarListingDirectory {
  type: 'directory';
  /** A prototype-less record, so a file named "__proto__" is an entry like any other. */
  entries: Record<string, NarListingNode>;
}
export interface NarListingSymlink {
  type: 'symlink';
  target: string;
}
export type NarListingNode = NarListingRegular | NarListingDirectory | NarListingSymlink;

export interface NarListing {
  version: 1;
  root: NarListingNode;
}

export const emptyEntries = (): Record<string, NarListingNode> => Object.create(null) as Record<string, NarListingNode>;

/** A NarVisitor that assembles the listing; read `listing` after the parser's end(). */
export class NarListingBuilder implements NarVisitor {
  private readonly stack: NarListingDirectory[] = [];
  private root: NarListingNode | undefined;

  get listing(): NarListing {
    if (!this.root) throw new Error('the NAR has not been read to its end, so there is no listing yet');
    return { version: 1, root: this.root };
  }

  private place(name: string, node: NarListingNode): void {
    const parent = this.stack[this.stack.length - 1];
    if (parent) parent.entries[name] = node;
    else this.root = node;
  }

  directory(_path: string, name: string): void {
    const node: NarListingDirectory = { type: 'directory', entries: emptyEntries() };
    this.place(name, node);
    this.stack.push(node);
  }

  directoryEnd(): void {
    this.stack.pop();
  }

  regular(_path: string, name: string, size: number, executable: boolean, narOffset: number): void {
    this.place(name, executable ? { type: 'regular', size, executable: true, narOffset } : { type: 'regular', size, narOffset });
  }

  symlink(_path: string, name: string, target: string): void {
    this.place(name, { type: 'symlink', target });
  }
}

/**
 * Code point order, which is UTF-8 byte order: the order of NAR entries. Plain `<` compares
 * UTF-16 units and would put U+FFFF after an emoji.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** Nix 2.8's JSON string escaping (libutil/json.cc): only ", \, \n, \r, \t and other controls. */
function jsonString(s: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(from, i);
    from = i + 1;
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else out += `\\u${c.toString(16).padStart(4, '0')}`;
  }
  return `${out}${s.slice(from)}"`;
}

function renderNode(node: NarListingNode, parts: string[]): void {
  if (node.type === 'regular') {
    parts.push(`{"type":"regular","size":${node.size}`);
    if (node.executable) parts.push(',"executable":true');
    // Nix omits a zero offset; a real file's contents never start at byte 0.
    if (node.narOffset) parts.push(`,"narOffset":${node.narOffset}`);
    parts.push('}');
  } else if (node.type === 'symlink') {
    parts.push(`{"type":"symlink","target":${jsonString(node.target)}}`);
  } else {
    parts.push('{"type":"directory","entries":{');
    const names = Object.keys(node.entries).sort(compareCodePoints);
    names.forEach((name, i) => {
      parts.push(`${i ? ',' : ''}${jsonString(name)}:`);
      renderNode(node.entries[name]!, parts);
    });
    parts.push('}}');
  }
}

/** The `.ls` text exactly as Nix 2.8 writes it (no trailing newline). */
export function renderNarListing(listing: NarListing): string {
  const parts = ['{"version":1,"root":'];
  renderNode(listing.root, parts);
  parts.push('}');
  return parts.join('');
}
