// A loopback front for s3rver that makes it answer as S3 does where kiln depends on it: every
// request's SigV4 signature is verified (sigV4Verifier.ts); bodies are received whole and checked
// against x-amz-content-sha256 before anything is stored; PutObject, DeleteObject and
// CompleteMultipartUpload replace an object atomically (keyLocks.ts); multipart uploads, their abort
// and ListMultipartUploads are the front's own (multipartUploads.ts). The rest goes to s3rver unsigned.
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat, unlink } from 'node:fs/promises';
import { Agent, createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { KeyLocks } from './keyLocks.js';
import { listMultipartUploads, MAX_UPLOADS } from './listMultipartUploads.js';
import { MultipartUploads, type CompletedPart } from './multipartUploads.js';
import { receiveBody, type ReceivedBody } from './requestBody.js';
import { S3Error, malformedXml, notImplemented, s3ResponseHeaders, sendS3Error } from './s3Errors.js';
import { xmlDocument, xmlElements, xmlText } from './s3Xml.js';
import { SigV4Verifier, type SigV4Account } from './sigV4Verifier.js';

export interface S3FrontOptions {
  /** s3rver's address, e.g. http://127.0.0.1:4568 */
  upstream: string;
  region: string;
  accounts: SigV4Account[];
  buckets: string[];
  /** a directory for bodies in flight and parts of uploads */
  scratchDir: string;
  /** the server's clock: request-time skew, presigned expiry, Initiated of uploads */
  now?: () => Date;
  /** ListMultipartUploads' page size (S3: 1000); smaller to make a test turn pages */
  maxUploads?: number;
}

export interface S3Front {
  endpoint: string;
  /** part files held for uploads not completed or aborted */
  partCount(): number;
  close(): Promise<void>;
}

// Auth that must not reach s3rver: it would try (and half do) its own checks.
const AUTH_HEADERS = ['authorization', 'x-amz-date', 'x-amz-content-sha256', 'x-amz-security-token'];
const HOP_HEADERS = ['host', 'connection', 'keep-alive', 'expect', 'transfer-encoding', 'content-length'];

export async function startS3Front(options: S3FrontOptions): Promise<S3Front> {
  const now = options.now ?? (() => new Date());
  const verifier = new SigV4Verifier(options.region, options.accounts, now);
  const scratch = await mkdtemp(join(options.scratchDir, 'front-'));
  const uploads = new MultipartUploads(join(scratch, 'uploads'), now);
  const locks = new KeyLocks();
  const agent = new Agent({ keepAlive: true });
  const upstream = new URL(options.upstream);
  const buckets = new Set(options.buckets);

  /** Sends the request on to s3rver without its signature and streams the answer back. */
  async function forward(request: IncomingMessage, response: ServerResponse, body?: ReceivedBody): Promise<void> {
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (!AUTH_HEADERS.includes(name) && !HOP_HEADERS.includes(name) && value !== undefined) headers[name] = value;
    }
    if (body !== undefined) headers['content-length'] = body.size;
    const proxied = httpRequest({ host: upstream.hostname, port: upstream.port, method: request.method, path: withoutQueryAuth(request.url!), headers, agent });
    const answer = new Promise<IncomingMessage>((resolve, reject) => proxied.on('response', resolve).on('error', reject));
    if (body === undefined) proxied.end();
    else createReadStream(body.file).pipe(proxied);
    const upstreamResponse = await answer;
    response.writeHead(upstreamResponse.statusCode ?? 502, upstreamResponse.headers);
    response.flushHeaders(); // s3rver may never send a body it announced (a range of an empty object)
    upstreamResponse.pipe(response);
    await finished(response).catch(() => undefined); // a client that leaves early is not an error here
    upstreamResponse.destroy();
  }

  function sendXml(response: ServerResponse, body: string): void {
    response.writeHead(200, { ...s3ResponseHeaders(), 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const verified = await verifier.verify({ method: request.method!, url: request.url!, headers: request.headers });
    const body = await receiveBody(request, scratch);
    try {
      if (verified.payloadHash !== 'UNSIGNED-PAYLOAD' && verified.payloadHash !== body.sha256) {
        throw new S3Error(400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.", {
          ClientComputedContentSHA256: verified.payloadHash, S3ComputedContentSHA256: body.sha256,
        });
      }
      await route(request, response, body);
    } finally {
      await unlink(body.file).catch(() => undefined); // taken over already when it became a part
    }
  }

  async function route(request: IncomingMessage, response: ServerResponse, body: ReceivedBody): Promise<void> {
    const url = new URL(request.url!, 'http://front');
    const [, bucket = '', ...keyParts] = url.pathname.split('/');
    const key = decodeURIComponent(keyParts.join('/'));
    const query = url.searchParams;
    const method = request.method!;
    const ours = (): void => {
      if (!buckets.has(bucket)) throw new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist', { BucketName: bucket });
    };

    if (key === '') {
      if (method === 'GET' && query.has('uploads')) {
        ours();
        return sendXml(response, listMultipartUploads(bucket, uploads.inBucket(bucket), query, options.maxUploads ?? MAX_UPLOADS));
      }
      return forward(request, response);
    }
    const lockKey = `${bucket}/${key}`;
    if (query.has('uploads') && method === 'POST') {
      ours();
      const upload = await uploads.create(bucket, key);
      return sendXml(response, xmlDocument('InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: upload.uploadId }));
    }
    const uploadId = query.get('uploadId');
    if (uploadId !== null) {
      ours();
      const upload = uploads.get(bucket, key, uploadId);
      if (method === 'PUT') {
        if (request.headers['x-amz-copy-source'] !== undefined) throw notImplemented('UploadPartCopy');
        const etag = await uploads.putPart(upload, query.get('partNumber') ?? '', body);
        response.writeHead(200, { ...s3ResponseHeaders(), etag, 'content-length': 0 });
        return void response.end();
      }
      if (method === 'DELETE') {
        await uploads.abort(upload);
        response.writeHead(204, s3ResponseHeaders());
        return void response.end();
      }
      if (method === 'POST') {
        const completed = await uploads.complete(upload, completedParts(await readFile(body.file, 'utf8')));
        const release = await locks.write(lockKey);
        try {
          await storeObject(request, completed.file);
        } finally {
          release();
          await rm(completed.file, { force: true });
        }
        return sendXml(response, xmlDocument('CompleteMultipartUploadResult', {
          Location: `${options.upstream}/${bucket}/${key}`, Bucket: bucket, Key: key, ETag: completed.etag,
        }));
      }
      throw notImplemented(`${method} with uploadId (ListParts)`);
    }
    if ([...query.keys()].some((name) => !name.startsWith('X-Amz-') && name !== 'x-id' && !name.startsWith('response-'))) {
      return forward(request, response); // sub-resources (tagging, acl, …): s3rver's answer as it is
    }
    if (method === 'PUT' && request.headers['x-amz-copy-source'] === undefined) {
      const release = await locks.write(lockKey);
      try {
        return await forward(request, response, body);
      } finally {
        release();
      }
    }
    const release = await (method === 'GET' || method === 'HEAD' ? locks.read(lockKey) : locks.write(lockKey));
    try {
      return await forward(request, response);
    } finally {
      release();
    }
  }

  /** Writes a whole object file to s3rver as one PutObject; the caller holds the key's write lock. */
  async function storeObject(request: IncomingMessage, file: string): Promise<void> {
    const { size } = await stat(file);
    const url = new URL(request.url!, 'http://front');
    const headers: OutgoingHttpHeaders = { 'content-length': size };
    const proxied = httpRequest({ host: upstream.hostname, port: upstream.port, method: 'PUT', path: url.pathname, headers, agent });
    const answer = new Promise<IncomingMessage>((resolve, reject) => proxied.on('response', resolve).on('error', reject));
    createReadStream(file).pipe(proxied);
    const stored = await answer;
    stored.resume();
    await finished(stored);
    if (stored.statusCode !== 200) throw new Error(`s3rver refused the completed object: ${stored.statusCode}`);
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      request.resume(); // a refused request's body is read and dropped, as S3 does
      if (response.headersSent) {
        response.destroy();
        return;
      }
      if (error instanceof S3Error) {
        sendS3Error(response, request.method, error);
        return;
      }
      if (!request.complete) {
        response.destroy(); // the client left mid-body: nobody to answer
        return;
      }
      sendS3Error(response, request.method, new S3Error(500, 'InternalError', `We encountered an internal error. Please try again. (${String(error)})`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    partCount: () => uploads.partCount(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

/** The <Part> list of a CompleteMultipartUpload body. */
function completedParts(xml: string): CompletedPart[] {
  const root = xmlElements(xml, 'CompleteMultipartUpload');
  if (root.length !== 1) throw malformedXml();
  const parts = xmlElements(root[0]!, 'Part').map((part) => {
    const number = xmlText(part, 'PartNumber');
    const etag = xmlText(part, 'ETag');
    if (number === undefined || !/^\d+$/.test(number) || etag === undefined) throw malformedXml();
    return { partNumber: Number(number), etag };
  });
  if (parts.length === 0) throw malformedXml();
  return parts;
}

/** The request target without query-string authentication. */
function withoutQueryAuth(target: string): string {
  const at = target.indexOf('?');
  if (at < 0) return target;
  const kept = target.slice(at + 1).split('&').filter((pair) => pair !== '' && !/^X-Amz-/i.test(decodeURIComponent(pair.split('=')[0]!)));
  return kept.length === 0 ? target.slice(0, at) : `${target.slice(0, at)}?${kept.join('&')}`;
}
