// The shared evaluation cache (docs/eval-cache.md), at the root like /build-sources: a worker
// evaluating for an organization asks which locked inputs the organization has
// (POST /eval-inputs/{evaluation}/query), downloads one as a NAR (GET …/{narHash}) and uploads
// those it fetched itself (PUT …/{narHash}), each with the capability token of its evaluation job.
import { z } from 'zod';
import type { Principal, Services } from '../../../services/index.js';
import { MAX_QUERY_HASHES } from '../../../services/index.js';
import { streamReply } from '../../reply.js';
import type { Router } from '../../router.js';

const EvaluationId = z.uuid('an evaluation id is a UUID');
const NarHashHex = z.string().regex(/^[0-9a-f]{64}$/, 'a NAR hash is the SHA-256 of the NAR in lower-case hex');
export const TokenQuery = z.object({ token: z.string().optional() });
export const EvalInputsQueryBody = z.strictObject({
  narHashes: z.array(NarHashHex).max(MAX_QUERY_HASHES, `at most ${MAX_QUERY_HASHES} hashes per query`),
});
export const EvalInputsPresent = z.object({ present: z.array(z.string()) });
export const EvalInputStored = z.object({ stored: z.boolean(), size: z.number() });

export function evalInputRoutes(root: Router<Principal>, { evalInputs: service, config }: Pick<Services, 'evalInputs' | 'config'>): void {
  root.post('/eval-inputs/:evaluation/query', async (req) => {
    const { narHashes } = await req.body(EvalInputsQueryBody);
    return { present: await service.present(req.param('evaluation', EvaluationId), req.query(TokenQuery).token ?? null, narHashes) };
  }, { auth: 'none' });

  root.get('/eval-inputs/:evaluation/:narHash', async (req) => {
    const read = await service.read(req.param('evaluation', EvaluationId), req.query(TokenQuery).token ?? null, req.param('narHash', NarHashHex));
    return streamReply(200, read.size, read.body, { 'content-type': 'application/x-nix-nar', 'cache-control': 'private, no-store', 'x-content-type-options': 'nosniff' });
  }, { auth: 'none' });

  root.put('/eval-inputs/:evaluation/:narHash', (req) =>
    service.store(req.param('evaluation', EvaluationId), req.query(TokenQuery).token ?? null, req.param('narHash', NarHashHex), req.stream()),
  { auth: 'none', body: 'stream', maxBody: config['nar.maxUploadSize'], maxBodyName: 'nar.maxUploadSize' });
}
