// Direct builds (docs/builds.md, "Direct builds"): POST /builds takes a multipart body with the
// parts project, closure (nix-store --export of the .drv's closure), and optionally drv and cache;
// GET /builds/direct/recent lists the caller's own. The whole body is capped at 20 MiB (spec,
// Limits: "Blob upload cap for build requests"), whatever http.maxRequestSize says.
import { z } from 'zod';
import { ApiError, describeIssue, DrvPathText } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { multipartBoundary, readMultipart } from '../../multipart.js';
import type { Router } from '../../router.js';

export const DIRECT_BUILD_MAX_BYTES = 20 * 1024 * 1024;
const MAX_TEXT_PART_BYTES = 1024;
const TEXT_PARTS = ['project', 'cache', 'drv'] as const;
type TextPart = (typeof TEXT_PARTS)[number];

const tooLarge = () =>
  new ApiError('body_too_large', `a direct build request is at most ${DIRECT_BUILD_MAX_BYTES} bytes (20 MiB, the fixed cap for build request uploads); the closure of a .drv is usually far smaller, so export only nix-store -qR of the .drv`);

async function collect(body: AsyncIterable<Uint8Array>, limit: number, name: string): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) throw new ApiError('invalid_multipart', `the ${name} part exceeds ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export const RecentQuery = z.object({ limit: z.coerce.number('a whole number from 1 to 200').int('a whole number from 1 to 200').min(1, 'a whole number from 1 to 200').max(200, 'a whole number from 1 to 200').default(50) });

export function directBuildsRoutes(api: Router<Principal>, { buildRequests: { direct: service } }: Pick<Services, 'buildRequests'>): void {
  api.post('/builds', async (req) => {
    const boundary = multipartBoundary(req.header('content-type'));
    const text: Partial<Record<TextPart, string>> = {};
    let closure: Buffer | null = null;
    try {
      for await (const part of readMultipart(req.stream(), boundary)) {
        if (part.name === 'closure') {
          if (closure) throw new ApiError('invalid_multipart', 'the body has more than one closure part');
          closure = await collect(part.body, DIRECT_BUILD_MAX_BYTES, 'closure');
        } else if ((TEXT_PARTS as readonly string[]).includes(part.name)) {
          const name = part.name as TextPart;
          if (text[name] !== undefined) throw new ApiError('invalid_multipart', `the body has more than one ${name} part`);
          text[name] = (await collect(part.body, MAX_TEXT_PART_BYTES, name)).toString('utf8').trim();
        } else {
          throw new ApiError('invalid_multipart', `unknown part "${part.name.slice(0, 60)}"; a direct build takes project, closure, drv and cache`);
        }
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 413) throw tooLarge();
      throw e;
    }
    if (!text.project) throw new ApiError('invalid_multipart', 'the body has no project part (org/project, or the project\'s UUID)');
    if (!closure || closure.length === 0) {
      throw new ApiError('invalid_multipart', 'the body has no closure part: send the output of nix-store --export $(nix-store -qR /nix/store/…drv)');
    }
    let drv: string | null = null;
    if (text.drv) {
      const parsed = DrvPathText.safeParse(text.drv);
      if (!parsed.success) throw new ApiError('invalid_multipart', `drv: ${describeIssue(parsed.error, 'drv').reason}`);
      drv = parsed.data;
    }
    return service.submit(req.principal, { project: text.project, cache: text.cache || null, drv, closure });
  }, { body: 'stream', maxBody: DIRECT_BUILD_MAX_BYTES, maxBodyName: 'the fixed 20 MiB cap of build request uploads' });

  api.get('/builds/direct/recent', (req) => {
    const { limit } = req.query(RecentQuery);
    return service.recent(req.principal, limit);
  });
}
