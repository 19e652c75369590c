// Verifies an S3 request's Signature Version 4 the way S3 does: recompute it with the AWS SDK's own
// signer (@smithy/signature-v4) from the secret on record, and refuse with S3's error code when the
// key is unknown, the scope or time is off, or the signature differs. Header and query (presigned)
// authentication both; anonymous requests are refused, the bucket being private.
import { SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest, QueryParameterBag, SourceData } from '@smithy/types';
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { S3Error, accessDenied } from './s3Errors.js';

export interface SigV4Account {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface SigV4Request {
  method: string;
  /** the request target as received: path and query, still percent-encoded */
  url: string;
  headers: IncomingHttpHeaders;
}

export interface Verified {
  accessKeyId: string;
  /** what x-amz-content-sha256 declares: a hex SHA-256 the body must match, or UNSIGNED-PAYLOAD */
  payloadHash: string;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
const MAX_SKEW_MS = 15 * 60_000;
const MAX_PRESIGN_SECS = 7 * 24 * 3600;
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
const QUERY_AUTH = ['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-SignedHeaders', 'X-Amz-Signature'];

/** node:crypto as the signer's hash: plain SHA-256, or HMAC-SHA256 when given a key. */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

function bytes(data: SourceData): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

interface Credential {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
}

export class SigV4Verifier {
  private readonly secrets: Map<string, string>;

  constructor(
    private readonly region: string,
    accounts: SigV4Account[],
    private readonly now: () => Date,
  ) {
    this.secrets = new Map(accounts.map((account) => [account.accessKeyId, account.secretAccessKey]));
  }

  async verify(request: SigV4Request): Promise<Verified> {
    const query = parseQuery(request.url);
    const header = request.headers.authorization;
    if (header !== undefined && query.has('X-Amz-Algorithm')) {
      throw new S3Error(400, 'InvalidArgument', 'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified');
    }
    if (header !== undefined) return this.verifyHeader(request, header, query);
    if (query.has('X-Amz-Algorithm')) return this.verifyQuery(request, query);
    throw accessDenied();
  }

  private async verifyHeader(request: SigV4Request, header: string, query: Map<string, string[]>): Promise<Verified> {
    if (!header.startsWith(`${ALGORITHM} `)) {
      throw new S3Error(400, 'InvalidArgument', 'Unsupported Authorization Type', { ArgumentName: 'Authorization', ArgumentValue: header });
    }
    const parts = new Map(header.slice(ALGORITHM.length + 1).split(',').map((part) => {
      const [name = '', ...value] = part.trim().split('=');
      return [name, value.join('=')] as const;
    }));
    const credentialText = parts.get('Credential');
    const signedHeaders = parts.get('SignedHeaders');
    const signature = parts.get('Signature');
    if (credentialText === undefined || signedHeaders === undefined || signature === undefined || parts.size !== 3) {
      throw malformedHeader('the authorization header requires three components: Credential, SignedHeaders, and Signature.');
    }
    const credential = this.checkCredential(credentialText, (message, fields) => malformedHeader(message, fields));
    const amzDate = single(request.headers['x-amz-date']);
    const signingDate = amzDate === undefined ? undefined : parseAmzDate(amzDate);
    if (signingDate === undefined) throw accessDenied('AWS authentication requires a valid Date or x-amz-date header');
    if (amzDate!.slice(0, 8) !== credential.date) {
      throw malformedHeader(`Invalid credential date "${credential.date}". This date is not the same as X-Amz-Date: "${amzDate!.slice(0, 8)}".`);
    }
    const payloadHash = single(request.headers['x-amz-content-sha256']);
    if (payloadHash === undefined) throw new S3Error(400, 'InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
    if (payloadHash !== UNSIGNED_PAYLOAD && !/^[0-9a-f]{64}$/.test(payloadHash)) {
      throw new S3Error(400, 'InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, or a valid sha256 value.', { ArgumentName: 'x-amz-content-sha256', ArgumentValue: payloadHash });
    }
    this.checkSkew(signingDate, amzDate!);
    const secret = this.secretOf(credential.accessKeyId);
    const names = signedHeaders.split(';');
    const toSign: HttpRequest = {
      ...target(request.url, query),
      method: request.method,
      headers: { ...pickHeaders(request.headers, names), 'x-amz-content-sha256': payloadHash },
    };
    const signer = signerFor(credential, secret);
    const expected = await signer.sign(toSign, { signingDate, signableHeaders: new Set(names) });
    const expectedParts = new Map(String(expected.headers.authorization).slice(ALGORITHM.length + 1).split(', ').map((part) => {
      const [name = '', ...value] = part.split('=');
      return [name, value.join('=')] as const;
    }));
    if (expectedParts.get('SignedHeaders') !== signedHeaders || !sameSignature(expectedParts.get('Signature'), signature)) {
      throw signatureMismatch(credential.accessKeyId, signature);
    }
    return { accessKeyId: credential.accessKeyId, payloadHash };
  }

  private async verifyQuery(request: SigV4Request, query: Map<string, string[]>): Promise<Verified> {
    const param = (name: string): string | undefined => (query.get(name)?.length === 1 ? query.get(name)![0] : undefined);
    if (param('X-Amz-Algorithm') !== ALGORITHM) {
      throw queryError(`X-Amz-Algorithm only supports "${ALGORITHM}"`);
    }
    const [credentialText, amzDate, expiresText, signedHeaders, signature] = QUERY_AUTH.slice(1).map(param);
    if (credentialText === undefined || amzDate === undefined || expiresText === undefined || signedHeaders === undefined || signature === undefined) {
      throw queryError('Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.');
    }
    const credential = this.checkCredential(credentialText, (message, fields) => queryError(message, fields));
    const signingDate = parseAmzDate(amzDate);
    if (signingDate === undefined) throw queryError(`X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`);
    const expiresIn = /^\d{1,7}$/.test(expiresText) ? Number(expiresText) : NaN;
    if (!(expiresIn >= 1)) throw queryError('X-Amz-Expires should be a number');
    if (expiresIn > MAX_PRESIGN_SECS) throw queryError(`X-Amz-Expires must be less than a week (in seconds) that is; ${MAX_PRESIGN_SECS}`);
    const now = this.now();
    const expires = new Date(signingDate.getTime() + expiresIn * 1000);
    if (now > expires) {
      throw accessDenied('Request has expired', { 'X-Amz-Expires': expiresText, Expires: isoSeconds(expires), ServerTime: isoSeconds(now) });
    }
    if (signingDate.getTime() - now.getTime() > MAX_SKEW_MS) throw accessDenied('Request is not valid yet');
    const secret = this.secretOf(credential.accessKeyId);
    const rest = new Map([...query].filter(([name]) => name !== 'X-Amz-Signature'));
    const names = signedHeaders.split(';');
    const toSign: HttpRequest = {
      ...target(request.url, rest),
      method: request.method,
      // S3 signs no payload in a presigned URL.
      headers: { ...pickHeaders(request.headers, names), 'x-amz-content-sha256': UNSIGNED_PAYLOAD },
    };
    const unhoisted = new Set([...names, 'x-amz-content-sha256']);
    const expected = await signerFor(credential, secret).presign(toSign, {
      signingDate, expiresIn, signableHeaders: new Set(names), unsignableHeaders: new Set(['x-amz-content-sha256']), unhoistableHeaders: unhoisted,
    });
    if (expected.query?.['X-Amz-SignedHeaders'] !== signedHeaders || !sameSignature(String(expected.query['X-Amz-Signature']), signature)) {
      throw signatureMismatch(credential.accessKeyId, signature);
    }
    return { accessKeyId: credential.accessKeyId, payloadHash: UNSIGNED_PAYLOAD };
  }

  private checkCredential(text: string, malformed: (message: string, fields?: Record<string, string>) => S3Error): Credential {
    const [accessKeyId = '', date = '', region = '', service = '', terminator = '', ...extra] = text.split('/');
    if (extra.length > 0 || terminator !== 'aws4_request' || !/^\d{8}$/.test(date) || accessKeyId === '') {
      throw malformed(`Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`);
    }
    if (region !== this.region) throw malformed(`the region '${region}' is wrong; expecting '${this.region}'`, { Region: this.region });
    if (service !== 's3') throw malformed(`Error parsing the X-Amz-Credential parameter; incorrect service "${service}". This endpoint belongs to "s3".`);
    return { accessKeyId, date, region, service };
  }

  private checkSkew(signingDate: Date, amzDate: string): void {
    const now = this.now();
    if (Math.abs(now.getTime() - signingDate.getTime()) > MAX_SKEW_MS) {
      throw new S3Error(403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', {
        RequestTime: amzDate, ServerTime: isoSeconds(now), MaxAllowedSkewMilliseconds: MAX_SKEW_MS,
      });
    }
  }

  private secretOf(accessKeyId: string): string {
    const secret = this.secrets.get(accessKeyId);
    if (secret === undefined) {
      throw new S3Error(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.', { AWSAccessKeyId: accessKeyId });
    }
    return secret;
  }
}

function signerFor(credential: Credential, secretAccessKey: string): SignatureV4 {
  return new SignatureV4({
    service: credential.service,
    region: credential.region,
    credentials: { accessKeyId: credential.accessKeyId, secretAccessKey },
    sha256: NodeSha256,
    uriEscapePath: false, // S3 signs the path as sent
    applyChecksum: true,
  });
}

function malformedHeader(detail: string, fields: Record<string, string> = {}): S3Error {
  return new S3Error(400, 'AuthorizationHeaderMalformed', `The authorization header is malformed; ${detail}`, fields);
}

function queryError(message: string, fields: Record<string, string> = {}): S3Error {
  return new S3Error(400, 'AuthorizationQueryParametersError', message, fields);
}

function signatureMismatch(accessKeyId: string, signature: string): S3Error {
  return new S3Error(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.', {
    AWSAccessKeyId: accessKeyId, SignatureProvided: signature,
  });
}

function sameSignature(expected: string | undefined, provided: string): boolean {
  if (expected === undefined || expected.length !== provided.length) return false;
  return timingSafeEqual(Buffer.from(expected), Buffer.from(provided));
}

/** The query as S3 reads it: names and values percent-decoded, a name without "=" has the value "". */
function parseQuery(url: string): Map<string, string[]> {
  const query = new Map<string, string[]>();
  const at = url.indexOf('?');
  if (at < 0) return query;
  for (const pair of url.slice(at + 1).split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
    const value = eq < 0 ? '' : decodeURIComponent(pair.slice(eq + 1));
    query.set(name, [...(query.get(name) ?? []), value]);
  }
  return query;
}

function target(url: string, query: Map<string, string[]>): Pick<HttpRequest, 'protocol' | 'hostname' | 'path' | 'query'> {
  const bag: QueryParameterBag = {};
  for (const [name, values] of query) bag[name] = values.length === 1 ? values[0]! : values;
  const at = url.indexOf('?');
  return { protocol: 'http:', hostname: '', path: at < 0 ? url : url.slice(0, at), query: bag };
}

function pickHeaders(headers: IncomingHttpHeaders, names: string[]): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of names) {
    const value = headers[name];
    if (value !== undefined) picked[name] = Array.isArray(value) ? value.join(',') : value;
  }
  return picked;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? undefined : value;
}

function parseAmzDate(text: string): Date | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (match === null) return undefined;
  const [, y, mo, d, h, mi, s] = match.map(Number) as [number, number, number, number, number, number, number];
  const date = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  return Number.isNaN(date.getTime()) ? undefined : date;
}

function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
