// Reading a NAR as an async iterator of entries, pulled from a byte stream. A regular file's
// contents are an async iterable of its own; whatever the caller does not read is skipped when
// it asks for the next entry, so a caller that only wants the listing never buffers a file.
import { byteIterator, type ByteSource } from './byteSource.js';
import type { NarLimits } from './narLimits.js';
import { NarParser, type NarVisitor } from './narParser.js';

export interface NarDirectoryEntry {
  type: 'directory';
  /** Relative to the NAR root, "/"-separated; the root is "". */
  path: string;
}
export interface NarSymlinkEntry {
  type: 'symlink';
  path: string;
  target: string;
}
export interface NarRegularEntry {
  type: 'regular';
  path: string;
  size: number;
  executable: boolean;
  /** Byte offset of the first content byte in the NAR (what the .ls listing records). */
  narOffset: number;
  /**
   * The file's bytes, as views into the source's chunks (copy them to keep them). Readable once,
   * and only until the next entry is requested.
   */
  contents: AsyncIterable<Uint8Array>;
}
export type NarEntry = NarDirectoryEntry | NarSymlinkEntry | NarRegularEntry;

type ParserEvent =
  | { kind: 'entry'; entry: NarDirectoryEntry | NarSymlinkEntry | Omit<NarRegularEntry, 'contents'> }
  | { kind: 'contents'; chunk: Uint8Array }
  | { kind: 'regularEnd' };

/** Parses `source` lazily; throws NarError on malformed input and passes source errors through. */
export async function* readNar(source: ByteSource, limits: Partial<NarLimits> = {}): AsyncGenerator<NarEntry> {
  const queue: ParserEvent[] = [];
  let head = 0;
  const visitor: NarVisitor = {
    directory: (path) => void queue.push({ kind: 'entry', entry: { type: 'directory', path } }),
    symlink: (path, _name, target) => void queue.push({ kind: 'entry', entry: { type: 'symlink', path, target } }),
    regular: (path, _name, size, executable, narOffset) =>
      void queue.push({ kind: 'entry', entry: { type: 'regular', path, size, executable, narOffset } }),
    contents: (chunk) => void queue.push({ kind: 'contents', chunk }),
    regularEnd: () => void queue.push({ kind: 'regularEnd' }),
  };
  const parser = new NarParser(visitor, limits);
  const chunks = byteIterator(source);
  let sourceDone = false;

  /** The next parser event, pulling chunks as needed; undefined once the NAR is complete. */
  const nextEvent = async (): Promise<ParserEvent | undefined> => {
    while (head === queue.length) {
      queue.length = 0;
      head = 0;
      if (sourceDone) return undefined;
      const next = await chunks.next();
      if (next.done) {
        sourceDone = true;
        parser.end();
      } else {
        parser.push(next.value);
      }
    }
    return queue[head++];
  };

  try {
    for (;;) {
      const event = await nextEvent();
      if (!event) return;
      if (event.kind !== 'entry') continue; // unread contents of the previous file
      if (event.entry.type !== 'regular') {
        yield event.entry;
        continue;
      }
      let started = false;
      let current = true;
      let finished = false;
      const stale = () => new Error(`the contents of "${event.entry.path}" can only be read once, before the next entry`);
      const contents = async function* (): AsyncGenerator<Uint8Array> {
        if (started || !current) throw stale();
        started = true;
        for (;;) {
          if (!current) throw stale();
          const item = await nextEvent();
          if (!item || item.kind === 'regularEnd') {
            finished = true;
            return;
          }
          if (item.kind === 'contents') yield item.chunk;
        }
      };
      yield { ...event.entry, contents: { [Symbol.asyncIterator]: contents } };
      current = false;
      if (!finished) await skipContents(nextEvent);
    }
  } finally {
    if (!sourceDone) await chunks.return?.();
  }
}

async function skipContents(nextEvent: () => Promise<ParserEvent | undefined>): Promise<void> {
  for (;;) {
    const item = await nextEvent();
    if (!item || item.kind === 'regularEnd') return;
  }
}
