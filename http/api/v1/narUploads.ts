// REST NAR uploads (spec: Caches): single-shot multipart, chunked with resume, finalize; plus the
// state of a staged upload and abandoning it (kiln's, for clients that resume or give up).
// http.maxRequestSize does not apply: these routes have nar.maxUploadSize as their limit.
import { z } from 'zod';
import { ApiError, describeIssue, NarUploadInfo, StorePathHash, type Narinfo } from '../../../protocol/index.js';
import type { NarUploadService, Principal, Services } from '../../../services/index.js';
import { readMultipart, multipartBoundary } from '../../multipart.js';
import type { Router } from '../../router.js';

/** The narinfo part is small JSON; anything bigger is a mistake, not a narinfo. */
const MAX_NARINFO_PART_BYTES = 1 << 20;

const NOT_AN_OFFSET = 'expected the number of bytes already staged (?offset=N)';
export const ChunkQuery = z.object({
  offset: z.string(NOT_AN_OFFSET).regex(/^\d{1,16}$/, NOT_AN_OFFSET).transform(Number).refine(Number.isSafeInteger, NOT_AN_OFFSET),
});

function declaredLength(header: string | undefined): number | null {
  const n = Number(header);
  return header !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : null;
}

async function jsonPart(body: AsyncIterable<Uint8Array>): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_NARINFO_PART_BYTES) throw new ApiError('invalid_multipart', `the narinfo part exceeds ${MAX_NARINFO_PART_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (e) {
    throw new ApiError('invalid_json', `the narinfo part is not valid JSON: ${(e as Error).message}`);
  }
}

function narinfoOfPart(uploads: NarUploadService, value: unknown): Narinfo {
  const parsed = NarUploadInfo.safeParse(value);
  if (!parsed.success) {
    const { field, reason } = describeIssue(parsed.error, 'part');
    throw new ApiError('invalid_narinfo', `narinfo ${field}: ${reason}`);
  }
  return uploads.parseUploadInfo(parsed.data);
}

export function narUploadRoutes(api: Router<Principal>, { narUploads: uploads, config }: Pick<Services, 'narUploads' | 'config'>): void {
  const maxUpload = config['nar.maxUploadSize'];

  api.post('/caches/:cache/nars', async (req): Promise<unknown> => {
    const target = await uploads.restTarget(req.principal, req.param<string>('cache'));
    const boundary = multipartBoundary(req.header('content-type'));
    return uploads.singleShot(target, declaredLength(req.header('content-length')), async (stage) => {
      let info: Narinfo | null = null;
      let staged = false;
      for await (const part of readMultipart(req.stream(), boundary)) {
        if (part.name === 'narinfo') info = narinfoOfPart(uploads, await jsonPart(part.body));
        else if (part.name === 'nar') {
          if (staged) throw new ApiError('invalid_multipart', 'the body has more than one nar part');
          await stage(part.body);
          staged = true;
        }
      }
      if (info === null) throw new ApiError('invalid_multipart', 'the body has no narinfo part (JSON: store_path, nar_hash, nar_size, references, …)');
      if (!staged) throw new ApiError('invalid_multipart', 'the body has no nar part');
      return info;
    });
  }, { body: 'stream', maxBody: maxUpload + MAX_NARINFO_PART_BYTES + 64 * 1024 });

  api.put('/caches/:cache/nars/:hash/chunk', async (req): Promise<unknown> => {
    const target = await uploads.restTarget(req.principal, req.param<string>('cache'));
    const hash = req.param('hash', StorePathHash);
    return uploads.appendChunk(target, hash, req.query(ChunkQuery).offset, declaredLength(req.header('content-length')), req.stream());
  }, { body: 'stream', maxBody: maxUpload, reuseBodyPieces: true }); // the staging writer writes each piece before the next

  api.post('/caches/:cache/nars/:hash/finalize', async (req): Promise<unknown> => {
    const target = await uploads.restTarget(req.principal, req.param<string>('cache'));
    return uploads.finalize(target, req.param('hash', StorePathHash), await req.body(NarUploadInfo));
  }, { body: 'buffer', maxBody: MAX_NARINFO_PART_BYTES });

  api.get('/caches/:cache/nars/:hash/upload', async (req) => {
    const target = await uploads.restTarget(req.principal, req.param<string>('cache'));
    return uploads.staged(target, req.param('hash', StorePathHash));
  });

  api.del('/caches/:cache/nars/:hash/upload', async (req) => {
    const target = await uploads.restTarget(req.principal, req.param<string>('cache'));
    return uploads.abandon(target, req.param('hash', StorePathHash));
  });
}
