// A POSIX tar (ustar, with pax headers for long names) writer, for the `serve` route's directory
// answers. Only what a NAR can hold: directories, regular files (executable or not) and symlinks,
// owned by root, dated at the Unix epoch like the store itself, so a path always packs the same bytes.

const BLOCK = 512;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, type: '0' | '2' | '5' | 'x', size: number, mode: number, linkName = ''): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(mode, 8), 100, 'latin1');
  block.write(octal(0, 8), 108, 'latin1'); // uid
  block.write(octal(0, 8), 116, 'latin1'); // gid
  block.write(octal(size, 12), 124, 'latin1');
  block.write(octal(0, 12), 136, 'latin1'); // mtime: the epoch, as in the store
  block.write('        ', 148, 'latin1'); // checksum field counts as spaces while summing
  block.write(type, 156, 'latin1');
  block.write(linkName, 157, 100, 'utf8');
  block.write('ustar\0', 257, 'latin1');
  block.write('00', 263, 'latin1');
  block.write('root', 265, 'latin1');
  block.write('root', 297, 'latin1');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

/** A pax record "<length> <key>=<value>\n", where the length counts itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body) + 1;
  while (String(length).length + Buffer.byteLength(body) !== length) length = String(length).length + Buffer.byteLength(body);
  return `${length}${body}`;
}

const padding = (size: number): Buffer => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);

/** Header blocks of one entry; names or link targets too long for ustar get a pax header first. */
function entryHeaders(name: string, type: '0' | '2' | '5', size: number, mode: number, linkName = ''): Buffer[] {
  const records: string[] = [];
  if (Buffer.byteLength(name) > 100) records.push(paxRecord('path', name));
  if (Buffer.byteLength(linkName) > 100) records.push(paxRecord('linkpath', linkName));
  if (records.length === 0) return [header(name, type, size, mode, linkName)];
  const pax = Buffer.from(records.join(''));
  return [header('././@PaxHeader', 'x', pax.length, 0o644), pax, padding(pax.length), header(name.slice(0, 100), type, size, mode, linkName.slice(0, 100))];
}

export const tarDirectory = (name: string): Buffer[] => entryHeaders(name.endsWith('/') ? name : `${name}/`, '5', 0, 0o755);
export const tarSymlink = (name: string, target: string): Buffer[] => entryHeaders(name, '2', 0, 0o777, target);
export const tarFileHeader = (name: string, size: number, executable: boolean): Buffer[] => entryHeaders(name, '0', size, executable ? 0o755 : 0o644);
export const tarFilePadding = padding;
/** Two zero blocks end an archive. */
export const tarEnd = (): Buffer => Buffer.alloc(2 * BLOCK);
