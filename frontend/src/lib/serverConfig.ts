// GET /api/v1/config, fetched once: what the sign-in pages need before anyone signs in.
import type { ServerConfigView } from '$protocol/api/serverConfig';
import { get } from './api';

/** GET /api/v1/config as protocol/api declares it. */
type ServerFeatures = ServerConfigView;

let pending: Promise<ServerFeatures> | null = null;

export function serverFeatures(): Promise<ServerFeatures> {
  pending ??= get<ServerFeatures>('/config').catch((e: unknown) => {
    pending = null;
    throw e;
  });
  return pending;
}
