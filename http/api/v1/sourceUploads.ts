// Source uploads (docs/builds.md, "Source uploads"): POST /build-requests/source?project=… takes
// the tarball as the raw body, up to http.maxSourceUploadSize; the answer's url is a capability
// URL at the root, GET /build-sources/{id}?token=…, which a worker fetches without an account.
// POST /build-requests/source/{id}/evaluate starts an evaluation of the uploaded tree (`kiln build`).
import { z } from 'zod';
import { EvaluateSourceBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { streamReply } from '../../reply.js';
import type { Router } from '../../router.js';

const SourceId = z.uuid('a source upload id is a UUID');
const NO_PROJECT = 'name the project the source is for (?project=org/project or its UUID)';
export const UploadQuery = z.object({ project: z.string(NO_PROJECT).min(1, NO_PROJECT) });
export const FetchQuery = z.object({ token: z.string().optional() });

/** `root` is the router at /: the capability URL lives outside /api/v1. */
export function sourceUploadRoutes(root: Router<Principal>, { buildRequests: { sources: service, sourceEvaluations }, config }: Pick<Services, 'buildRequests' | 'config'>): void {
  const api = root.scope('/api/v1');
  const maxBytes = config['http.maxSourceUploadSize'];
  api.post('/build-requests/source', (req) => {
    const { project } = req.query(UploadQuery);
    return service.upload(req.principal, project, req.stream());
  }, { body: 'stream', maxBody: maxBytes, maxBodyName: 'http.maxSourceUploadSize' });

  api.post('/build-requests/source/:id/evaluate', async (req) =>
    sourceEvaluations.evaluate(req.principal, req.param('id', SourceId), await req.body(EvaluateSourceBody)));

  root.get('/build-sources/:id', async (req) => {
    const { read, format, sha256 } = await service.fetch(req.param('id', SourceId), req.query(FetchQuery).token ?? null);
    const type = { gzip: 'application/gzip', zstd: 'application/zstd', xz: 'application/x-xz', bzip2: 'application/x-bzip2', tar: 'application/x-tar' }[format];
    return streamReply(200, read.size, read.body, { 'content-type': type ?? 'application/octet-stream', 'x-content-sha256': sha256, 'cache-control': 'private, no-store', 'x-content-type-options': 'nosniff' });
  }, { auth: 'none' });
}
