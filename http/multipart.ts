// A streaming multipart/form-data reader (RFC 7578) for the single-shot NAR upload: parts come one
// after the other, each body streamed as it arrives, so a 512 MiB NAR part is never held in
// memory. Only what an upload needs: the part's name, filename and content type; no nested parts.
import { ApiError } from '../protocol/index.js';

export interface MultipartPart {
  name: string;
  filename: string | null;
  contentType: string | null;
  /** Read it before asking for the next part; whatever is left unread is skipped. */
  body: AsyncIterable<Uint8Array>;
}

const MAX_HEADER_BYTES = 16 * 1024;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

const malformed = (reason: string): ApiError => new ApiError('invalid_multipart', `the multipart body is malformed: ${reason}`);

/** The boundary of a `multipart/form-data; boundary=…` Content-Type; 400 when there is none. */
export function multipartBoundary(contentType: string | undefined): string {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) {
    throw new ApiError('invalid_multipart', `expected Content-Type multipart/form-data, got ${JSON.stringify(contentType ?? '')}`);
  }
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary) throw new ApiError('invalid_multipart', 'the multipart/form-data Content-Type has no boundary parameter');
  return boundary;
}

/** Reads more of the source into one buffer on demand. */
class Bytes {
  // The leading CRLF lets the first delimiter be found like every later one.
  buffer: Buffer = Buffer.from(CRLF);
  private readonly source: AsyncIterator<Uint8Array>;
  ended = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.source = source[Symbol.asyncIterator]();
  }

  async more(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.source.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    const chunk = Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    return true;
  }

  take(n: number): Buffer {
    const head = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return head;
  }

  async close(): Promise<void> {
    await this.source.return?.();
  }
}

function parseHeaders(block: string): { name: string; filename: string | null; contentType: string | null } {
  let disposition: string | undefined;
  let contentType: string | null = null;
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 1) throw malformed(`a part header line is not "Name: value": ${JSON.stringify(line.slice(0, 60))}`);
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === 'content-disposition') disposition = value;
    else if (key === 'content-type') contentType = value;
  }
  if (!disposition || !/^form-data\b/i.test(disposition)) throw malformed('a part has no Content-Disposition: form-data header');
  const param = (p: string) => new RegExp(`;\\s*${p}="([^"]*)"|;\\s*${p}=([^;\\s]+)`, 'i').exec(disposition!);
  const nameMatch = param('name');
  const name = nameMatch?.[1] ?? nameMatch?.[2];
  if (name === undefined) throw malformed('a part\'s Content-Disposition has no name');
  const fileMatch = param('filename');
  return { name, filename: fileMatch?.[1] ?? fileMatch?.[2] ?? null, contentType };
}

/** The parts of a multipart body in order. Malformed input is a 400 invalid_multipart. */
export async function* readMultipart(source: AsyncIterable<Uint8Array>, boundary: string): AsyncGenerator<MultipartPart> {
  const bytes = new Bytes(source);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  try {
    // The preamble, up to the first delimiter, is ignored.
    for (;;) {
      const at = bytes.buffer.indexOf(delimiter);
      if (at >= 0) {
        bytes.take(at + delimiter.length);
        break;
      }
      bytes.take(Math.max(0, bytes.buffer.length - delimiter.length));
      if (!(await bytes.more())) throw malformed(`the boundary "${boundary}" never occurs`);
    }
    for (;;) {
      while (bytes.buffer.length < 2) if (!(await bytes.more())) throw malformed('the body ends right after a boundary');
      if (bytes.buffer[0] === 0x2d && bytes.buffer[1] === 0x2d) return; // "--": the closing delimiter
      // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
      let eol = bytes.buffer.indexOf(CRLF);
      while (eol < 0) {
        if (bytes.buffer.length > 80 || !(await bytes.more())) throw malformed('a boundary is not followed by a line break');
        eol = bytes.buffer.indexOf(CRLF);
      }
      if (bytes.take(eol + 2).subarray(0, eol).some((b) => b !== 0x20 && b !== 0x09)) throw malformed('unexpected bytes after a boundary');

      let end = bytes.buffer.indexOf(HEADER_END);
      while (end < 0) {
        if (bytes.buffer.length > MAX_HEADER_BYTES) throw malformed(`a part's headers exceed ${MAX_HEADER_BYTES} bytes`);
        if (!(await bytes.more())) throw malformed('the body ends inside a part\'s headers');
        end = bytes.buffer.indexOf(HEADER_END);
      }
      const headers = parseHeaders(bytes.take(end + HEADER_END.length).subarray(0, end).toString('utf8'));
      let partDone = false;
      const nextChunk = async (): Promise<Buffer | null> => {
        while (!partDone) {
          const at = bytes.buffer.indexOf(delimiter);
          if (at >= 0) {
            const chunk = bytes.take(at);
            bytes.take(delimiter.length);
            partDone = true;
            return chunk.length > 0 ? chunk : null;
          }
          // Everything but a possible start of the delimiter can go out now.
          const safe = bytes.buffer.length - (delimiter.length - 1);
          if (safe > 0) return bytes.take(safe);
          if (!(await bytes.more())) throw malformed(`the body ends inside the part "${headers.name}"`);
        }
        return null;
      };
      const body: AsyncIterable<Uint8Array> = {
        async *[Symbol.asyncIterator]() {
          for (let chunk = await nextChunk(); chunk !== null; chunk = await nextChunk()) yield chunk;
        },
      };
      yield { ...headers, body };
      while ((await nextChunk()) !== null); // whatever the caller left unread
    }
  } finally {
    await bytes.close();
  }
}
