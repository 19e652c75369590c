// GET /api/v1/metrics and GET /metrics: the Prometheus scrape (docs/metrics.md). Its own bearer
// token, read from metrics.tokenFile at every scrape (a rotated token works at once) and compared
// in constant time; no metrics.tokenFile: 404, as if the route did not exist.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readSecretFile } from '../../../config/index.js';
import { ApiError } from '../../../protocol/index.js';
import type { Services } from '../../../services/index.js';
import { bytesReply } from '../../reply.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Whether `header` is `Bearer <token>`; both sides hashed first, so the comparison takes the same time whatever the lengths. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? '');
  return timingSafeEqual(digest(match?.[1] ?? ''), digest(token)) && match !== null;
}

export function metricsRoutes<P>(api: Router<P>, root: Router<P>, { config, metrics }: Pick<Services, 'config' | 'metrics'>): void {
  const tokenFile = config['metrics.tokenFile'];
  const scrape = async (req: Req<P>) => {
    if (tokenFile === null) throw new ApiError('not_found', 'the metrics endpoint is disabled: metrics.tokenFile is not set');
    const header = req.header('authorization');
    if (header === undefined) throw new ApiError('unauthorized', 'the metrics scrape needs Authorization: Bearer <token> (metrics.tokenFile)');
    if (!bearerMatches(header, readSecretFile(tokenFile))) throw new ApiError('invalid_token', 'the metrics scrape token does not match metrics.tokenFile');
    return bytesReply(200, await metrics.text(), { 'Content-Type': metrics.contentType });
  };
  // /metrics at the root too: Prometheus scrapes /metrics unless told a metrics_path.
  api.get('/metrics', scrape, { auth: 'none' });
  root.get('/metrics', scrape, { auth: 'none' });
}
