// GET /api/v1/config, fetched once: what the sign-in pages need before anyone signs in.
import { get } from './api';

/** The fields of GET /api/v1/config the pages read (http/api/v1/serverConfig.ts answers them). */
export interface ServerFeatures {
  registration: boolean;
  oidc: boolean;
  oidc_required: boolean;
  email_verification: boolean;
  logo_url: string | null;
  create_cache: boolean;
  create_project: boolean;
  create_team: boolean;
}

let pending: Promise<ServerFeatures> | null = null;

export function serverFeatures(): Promise<ServerFeatures> {
  pending ??= get<ServerFeatures>('/config').catch((e: unknown) => {
    pending = null;
    throw e;
  });
  return pending;
}
