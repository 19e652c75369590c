// Req: a request as route handlers see it (params, headers, body, principal), never uWS itself.
import type { z } from 'zod';
import { ApiError, describeIssue } from '../protocol/index.js';
import type { BodyStream } from './body.js';

const ID_PREFIX = process.pid.toString(36);

/**
 * Everything a handler may know about a request, copied out of uWS before the first await
 * (uWS's HttpRequest is stack-allocated and dies when the callback returns).
 */
export class Req<P = unknown> {
  /** Set by the router's authenticator before the handler runs. */
  principal!: P;

  constructor(
    /** this process's count of requests so far (the id, in short) */
    private readonly sequence: number,
    readonly method: string,
    readonly path: string,
    private readonly queryText: string,
    readonly headers: Readonly<Record<string, string>>,
    /** The client's address (the peer, or the X-Forwarded-For hop it vouches for), worked out on first use. */
    private readonly address: () => string,
    readonly params: Readonly<Record<string, string>>,
    private readonly rawBody: Promise<Buffer> | null,
    private readonly bodyStream: BodyStream | null,
    /** a HEAD request (routed as GET, answered without a body) */
    readonly isHead = false,
    /** subscribes to the client's leaving (the listener runs at once when it already left); returns the unsubscribe */
    private readonly watchAbort: ((listener: () => void) => () => void) | null = null,
  ) {}

  private knownSignal: AbortSignal | undefined;

  /**
   * Aborted when the client goes away before the answer is written, made on first use (most
   * handlers never wait on anything the client's leaving should stop, as a storage read place).
   */
  get signal(): AbortSignal {
    if (this.knownSignal) return this.knownSignal;
    const controller = new AbortController();
    this.knownSignal = controller.signal;
    this.watchAbort?.(() => controller.abort());
    return this.knownSignal;
  }

  /** The request's id in logs and 500 answers: the process and its request count, made on first use. */
  get id(): string {
    return `${ID_PREFIX}-${this.sequence.toString(36)}`;
  }

  private knownAddress: string | undefined;
  private knownQuery: URLSearchParams | undefined;

  /** The raw query string, parsed on first use (most requests never look); routes read it through query(). */
  get searchParams(): URLSearchParams {
    this.knownQuery ??= new URLSearchParams(this.queryText);
    return this.knownQuery;
  }

  /**
   * The query string checked against a schema of string fields (an absent parameter is undefined):
   * a problem is a 400 invalid_query naming the parameter. A parameter given twice counts once,
   * with its last value.
   */
  query<T>(schema: z.ZodType<T>): T {
    const parsed = schema.safeParse(Object.fromEntries(this.searchParams));
    if (parsed.success) return parsed.data;
    const { field, reason } = describeIssue(parsed.error, 'query');
    throw new ApiError('invalid_query', `${field}: ${reason}`);
  }

  /**
   * The client's address: the peer, or the right-most untrusted X-Forwarded-For hop when the peer is
   * a trusted proxy. Worked out on first use: uWS makes a new ArrayBuffer for every address it
   * prints, which measured as the largest single cost of a cached narinfo request.
   */
  get peerAddress(): string {
    this.knownAddress ??= this.address();
    return this.knownAddress;
  }

  header(name: string): string | undefined {
    return this.headers[name.toLowerCase()];
  }

  /** A path parameter checked against a schema; a mismatch is a 400 naming the parameter. */
  param<T>(name: string, schema?: z.ZodType<T>): T {
    const raw = this.params[name];
    if (raw === undefined) throw new Error(`route has no parameter "${name}"`);
    if (!schema) return raw as T;
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      throw new ApiError('invalid_parameter', `${name}: ${describeIssue(parsed.error, name).reason}`);
    }
    return parsed.data;
  }

  /** The whole body as bytes (routes registered with body: 'buffer'). */
  async bytes(): Promise<Buffer> {
    if (!this.rawBody) throw new Error(`${this.method} ${this.path} was not registered to read a body`);
    return this.rawBody;
  }

  /** The body parsed as JSON and validated; problems are 400s that name the field. */
  async body<T>(schema: z.ZodType<T>): Promise<T> {
    const raw = await this.bytes();
    let value: unknown;
    if (raw.length === 0) value = {};
    else {
      try {
        value = JSON.parse(raw.toString('utf8'));
      } catch (e) {
        throw new ApiError('invalid_json', `request body is not valid JSON: ${(e as Error).message}`);
      }
    }
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      const { field, reason } = describeIssue(parsed.error, 'body');
      throw new ApiError('invalid_body', `${field}: ${reason}`);
    }
    return parsed.data;
  }

  /** The body as a stream with backpressure (routes registered with body: 'stream'). */
  stream(): BodyStream {
    if (!this.bodyStream) throw new Error(`${this.method} ${this.path} was not registered to stream a body`);
    return this.bodyStream;
  }
}
