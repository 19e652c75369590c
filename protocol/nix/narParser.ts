// A push parser for NAR archives: feed it chunks of any size with push(), then end(). It calls
// a visitor as nodes start and end and hands file contents over as views into the pushed
// chunks, so memory stays constant whatever the archive holds: the only buffer is one token
// (at most a name or a symlink target) and one frame per open directory.
//
// It accepts exactly the canonical NAR that `nix-store --dump` writes: tokens in Nix's order,
// entries sorted by name bytes without duplicates, zero padding, nothing after the root node.
// Nix's own reader tolerates some reordering, but such an archive has a different NarHash than
// the path it claims to be, so a cache has no use for it.
import { NarError } from './narError.js';
import { NAR_MAGIC, padding } from './narEncoding.js';
import { DEFAULT_NAR_LIMITS, type NarLimits } from './narLimits.js';

/** Paths are relative to the NAR root, joined with "/"; the root itself is "". */
export interface NarVisitor {
  directory?(path: string, name: string): void;
  directoryEnd?(path: string): void;
  regular?(path: string, name: string, size: number, executable: boolean, narOffset: number): void;
  /** A view into the pushed chunk: copy it if you keep it past the call. */
  contents?(chunk: Uint8Array): void;
  regularEnd?(path: string): void;
  symlink?(path: string, name: string, target: string): void;
}

const enum Phase {
  Length,
  Body,
  Contents,
  ContentsPadding,
  End,
}

/** What the next string token must be. */
const enum Expect {
  Magic,
  Open,
  TypeKeyword,
  TypeValue,
  RegularField,
  ExecutableValue,
  ContentsKeyword,
  TargetKeyword,
  TargetValue,
  NodeClose,
  DirectoryField,
  EntryOpen,
  NameKeyword,
  NameValue,
  NodeKeyword,
  EntryClose,
}

const DESCRIBE: Record<Expect, string> = {
  [Expect.Magic]: `the magic "${NAR_MAGIC}"`,
  [Expect.Open]: '"(" opening a node',
  [Expect.TypeKeyword]: '"type"',
  [Expect.TypeValue]: 'a node type ("regular", "directory" or "symlink")',
  [Expect.RegularField]: '"executable" or "contents"',
  [Expect.ExecutableValue]: 'the empty executable marker ""',
  [Expect.ContentsKeyword]: '"contents"',
  [Expect.TargetKeyword]: '"target"',
  [Expect.TargetValue]: 'a symlink target',
  [Expect.NodeClose]: '")" closing the node',
  [Expect.DirectoryField]: '"entry" or ")" closing the directory',
  [Expect.EntryOpen]: '"(" opening a directory entry',
  [Expect.NameKeyword]: '"name"',
  [Expect.NameValue]: 'an entry name',
  [Expect.NodeKeyword]: '"node"',
  [Expect.EntryClose]: '")" closing the directory entry',
};

/** Tags are short; a longer string where a tag belongs is refused before it is buffered. */
const MAX_TAG_BYTES = 16;
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

interface DirectoryFrame {
  path: string;
  previousName: Uint8Array | undefined;
}

const tagText = (bytes: Uint8Array): string => {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 40)).toString('latin1');
  return JSON.stringify(bytes.length > 40 ? `${text}…` : text);
};

const isTag = (bytes: Uint8Array, tag: string): boolean => {
  if (bytes.length !== tag.length) return false;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== tag.charCodeAt(i)) return false;
  return true;
};

export class NarParser {
  private readonly limits: NarLimits;
  private readonly buffer: Uint8Array;
  private phase = Phase.Length;
  private expect = Expect.Magic;
  private need = 8;
  private filled = 0;
  private stringLength = 0;
  private tokenStart = 0;
  private readingContents = false;
  private remaining = 0;
  private executable = false;
  private nodePath = '';
  private nodeName = '';
  private readonly frames: DirectoryFrame[] = [];
  private failure: NarError | undefined;
  /** Bytes consumed so far; after end() this is the NAR's size. */
  position = 0;

  constructor(
    private readonly visitor: NarVisitor = {},
    limits: Partial<NarLimits> = {},
  ) {
    this.limits = { ...DEFAULT_NAR_LIMITS, ...limits };
    const longest = Math.max(this.limits.maxNameBytes, this.limits.maxTargetBytes, MAX_TAG_BYTES);
    this.buffer = new Uint8Array(longest + padding(longest) + 8);
  }

  /** Parses one more chunk. Throws NarError on the first malformed byte, and again on any later call. */
  push(chunk: Uint8Array): void {
    if (this.failure) throw this.failure;
    try {
      this.consume(chunk);
    } catch (e) {
      if (e instanceof NarError) this.failure = e;
      throw e;
    }
  }

  /** Declares the stream finished; throws NarError if the archive is incomplete. */
  end(): void {
    if (this.failure) throw this.failure;
    if (this.phase === Phase.End) return;
    const what =
      this.phase === Phase.Contents
        ? `${this.remaining} more bytes of file contents`
        : this.phase === Phase.ContentsPadding
          ? 'the padding after file contents'
          : this.readingContents
            ? 'the length of the file contents'
            : DESCRIBE[this.expect];
    this.failure = new NarError(this.position, `truncated: the stream ended while expecting ${what}`);
    throw this.failure;
  }

  get done(): boolean {
    return this.phase === Phase.End;
  }

  /**
   * The most bytes the next push may hold without reaching past the archive's end: a reader of a
   * stream where the NAR is followed by more (`nix-store --export`'s format) takes no more than this.
   */
  get wants(): number {
    if (this.phase === Phase.End) return 0;
    return this.phase === Phase.Contents ? this.remaining : this.need - this.filled;
  }

  private consume(chunk: Uint8Array): void {
    const n = chunk.length;
    if (n > this.limits.maxNarSize - this.position) {
      throw new NarError(this.limits.maxNarSize, `the NAR is larger than the limit of ${this.limits.maxNarSize} bytes`);
    }
    let i = 0;
    while (i < n) {
      if (this.phase === Phase.Contents) {
        const take = Math.min(this.remaining, n - i);
        this.visitor.contents?.(chunk.subarray(i, i + take));
        i += take;
        this.position += take;
        this.remaining -= take;
        if (this.remaining === 0) this.startContentsPadding();
        continue;
      }
      if (this.phase === Phase.End) {
        throw new NarError(this.position, 'trailing garbage after the end of the archive');
      }
      if (this.filled === 0 && n - i >= this.need) {
        const view = chunk.subarray(i, i + this.need);
        i += this.need;
        this.position += this.need;
        this.complete(view);
        continue;
      }
      const take = Math.min(this.need - this.filled, n - i);
      this.buffer.set(chunk.subarray(i, i + take), this.filled);
      this.filled += take;
      i += take;
      this.position += take;
      if (this.filled === this.need) {
        this.filled = 0;
        this.complete(this.buffer.subarray(0, this.need));
      }
    }
  }

  private complete(bytes: Uint8Array): void {
    switch (this.phase) {
      case Phase.Length:
        return this.lengthRead(bytes);
      case Phase.Body:
        this.checkPadding(bytes, this.stringLength);
        return this.token(bytes.subarray(0, this.stringLength));
      case Phase.ContentsPadding:
        this.checkPadding(bytes, 0);
        this.visitor.regularEnd?.(this.nodePath);
        return this.expectNext(Expect.NodeClose);
    }
  }

  private lengthRead(bytes: Uint8Array): void {
    const low = (bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16)) + bytes[3]! * 0x100_0000;
    const high = (bytes[4]! | (bytes[5]! << 8) | (bytes[6]! << 16)) + bytes[7]! * 0x100_0000;
    if (high > 0x1f_ffff) throw new NarError(this.tokenStart, `absurd length: a string or file of more than 2^53 bytes`);
    const length = high * 0x1_0000_0000 + low;
    if (this.readingContents) {
      this.readingContents = false;
      if (length > this.limits.maxNarSize - this.position) {
        throw new NarError(this.tokenStart, `absurd length: a file of ${length} bytes does not fit the NAR size limit of ${this.limits.maxNarSize}`);
      }
      this.visitor.regular?.(this.nodePath, this.nodeName, length, this.executable, this.position);
      this.remaining = length;
      this.stringLength = length;
      if (length === 0) this.startContentsPadding();
      else this.phase = Phase.Contents;
      return;
    }
    const max =
      this.expect === Expect.NameValue
        ? this.limits.maxNameBytes
        : this.expect === Expect.TargetValue
          ? this.limits.maxTargetBytes
          : MAX_TAG_BYTES;
    if (length > max) {
      const what = this.expect === Expect.Magic ? 'bad magic: expected' : 'expected';
      throw new NarError(this.tokenStart, `${what} ${DESCRIBE[this.expect]}, got a string of ${length} bytes (limit ${max})`);
    }
    this.stringLength = length;
    this.phase = Phase.Body;
    this.need = length + padding(length);
    if (this.need === 0) this.complete(EMPTY);
  }

  private startContentsPadding(): void {
    this.phase = Phase.ContentsPadding;
    this.need = padding(this.stringLength);
    this.tokenStart = this.position;
    if (this.need === 0) this.complete(EMPTY);
  }

  private checkPadding(bytes: Uint8Array, from: number): void {
    for (let k = from; k < bytes.length; k++) {
      if (bytes[k] !== 0) throw new NarError(this.position - bytes.length + k, 'non-zero padding');
    }
  }

  private expectNext(expect: Expect): void {
    this.expect = expect;
    this.phase = Phase.Length;
    this.need = 8;
    this.tokenStart = this.position;
  }

  private unexpected(bytes: Uint8Array): NarError {
    const prefix = this.expect === Expect.Magic ? 'bad magic: ' : this.expect === Expect.TypeValue ? 'unknown node type: ' : 'unknown tag: ';
    return new NarError(this.tokenStart, `${prefix}expected ${DESCRIBE[this.expect]}, got ${tagText(bytes)}`);
  }

  private token(bytes: Uint8Array): void {
    switch (this.expect) {
      case Expect.Magic:
        if (!isTag(bytes, NAR_MAGIC)) throw this.unexpected(bytes);
        return this.expectNext(Expect.Open);
      case Expect.Open:
      case Expect.EntryOpen:
        if (!isTag(bytes, '(')) throw this.unexpected(bytes);
        return this.expectNext(this.expect === Expect.Open ? Expect.TypeKeyword : Expect.NameKeyword);
      case Expect.TypeKeyword:
        if (!isTag(bytes, 'type')) throw this.unexpected(bytes);
        return this.expectNext(Expect.TypeValue);
      case Expect.TypeValue:
        return this.nodeType(bytes);
      case Expect.RegularField:
        if (isTag(bytes, 'executable')) return this.expectNext(Expect.ExecutableValue);
        if (isTag(bytes, 'contents')) return this.startContents();
        throw this.unexpected(bytes);
      case Expect.ExecutableValue:
        if (bytes.length !== 0) throw new NarError(this.tokenStart, `the executable marker must be empty, got ${tagText(bytes)}`);
        this.executable = true;
        return this.expectNext(Expect.ContentsKeyword);
      case Expect.ContentsKeyword:
        if (!isTag(bytes, 'contents')) throw this.unexpected(bytes);
        return this.startContents();
      case Expect.TargetKeyword:
        if (!isTag(bytes, 'target')) throw this.unexpected(bytes);
        return this.expectNext(Expect.TargetValue);
      case Expect.TargetValue:
        return this.target(bytes);
      case Expect.NodeClose:
        if (!isTag(bytes, ')')) throw this.unexpected(bytes);
        return this.nodeFinished();
      case Expect.DirectoryField:
        if (isTag(bytes, 'entry')) return this.expectNext(Expect.EntryOpen);
        if (isTag(bytes, ')')) {
          const frame = this.frames.pop()!;
          this.visitor.directoryEnd?.(frame.path);
          return this.nodeFinished();
        }
        throw this.unexpected(bytes);
      case Expect.NameKeyword:
        if (!isTag(bytes, 'name')) throw this.unexpected(bytes);
        return this.expectNext(Expect.NameValue);
      case Expect.NameValue:
        return this.entryName(bytes);
      case Expect.NodeKeyword:
        if (!isTag(bytes, 'node')) throw this.unexpected(bytes);
        return this.expectNext(Expect.Open);
      case Expect.EntryClose:
        if (!isTag(bytes, ')')) throw this.unexpected(bytes);
        return this.expectNext(Expect.DirectoryField);
    }
  }

  private nodeType(bytes: Uint8Array): void {
    if (isTag(bytes, 'regular')) {
      this.executable = false;
      return this.expectNext(Expect.RegularField);
    }
    if (isTag(bytes, 'symlink')) return this.expectNext(Expect.TargetKeyword);
    if (!isTag(bytes, 'directory')) throw this.unexpected(bytes);
    if (this.frames.length >= this.limits.maxDepth) {
      throw new NarError(this.tokenStart, `directories nested deeper than the limit of ${this.limits.maxDepth}`);
    }
    this.frames.push({ path: this.nodePath, previousName: undefined });
    this.visitor.directory?.(this.nodePath, this.nodeName);
    this.expectNext(Expect.DirectoryField);
  }

  private startContents(): void {
    this.readingContents = true;
    this.expectNext(Expect.RegularField);
  }

  private target(bytes: Uint8Array): void {
    if (bytes.length === 0) throw new NarError(this.tokenStart, 'empty symlink target');
    if (bytes.includes(0)) throw new NarError(this.tokenStart, 'symlink target contains a NUL byte');
    this.visitor.symlink?.(this.nodePath, this.nodeName, decoder.decode(bytes));
    this.expectNext(Expect.NodeClose);
  }

  private entryName(bytes: Uint8Array): void {
    const problem =
      bytes.length === 0
        ? 'an empty entry name'
        : isTag(bytes, '.') || isTag(bytes, '..')
          ? `the entry name ${tagText(bytes)}`
          : bytes.includes(0x2f)
            ? `an entry name containing "/": ${tagText(bytes)}`
            : bytes.includes(0)
              ? `an entry name containing a NUL byte: ${tagText(bytes)}`
              : undefined;
    if (problem) throw new NarError(this.tokenStart, `invalid file name: ${problem}`);
    const frame = this.frames[this.frames.length - 1]!;
    if (frame.previousName) {
      const order = Buffer.compare(frame.previousName, bytes);
      if (order === 0) throw new NarError(this.tokenStart, `duplicate entry ${tagText(bytes)} in directory "${frame.path}"`);
      if (order > 0) {
        throw new NarError(this.tokenStart, `entries not sorted: ${tagText(bytes)} comes after ${tagText(frame.previousName)} in directory "${frame.path}"`);
      }
    }
    // A copy: `bytes` may be a view of the caller's chunk, and callers reuse their buffers.
    frame.previousName = new Uint8Array(bytes);
    this.nodeName = decoder.decode(bytes);
    this.nodePath = frame.path === '' ? this.nodeName : `${frame.path}/${this.nodeName}`;
    this.expectNext(Expect.NodeKeyword);
  }

  private nodeFinished(): void {
    if (this.frames.length === 0) {
      this.phase = Phase.End;
      return;
    }
    this.nodePath = this.frames[this.frames.length - 1]!.path;
    this.expectNext(Expect.EntryClose);
  }
}
