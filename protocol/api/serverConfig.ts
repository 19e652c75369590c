// GET /api/v1/config: the server settings a client (the web UI, the CLI) may know before signing in.
import { z } from 'zod';

const CreatorRule = z.enum(['none', 'superusers', 'everyone']);

export const ServerConfigView = z.strictObject({
  /** registration is open (and OIDC is not required) */
  registration: z.boolean(),
  oidc: z.boolean(),
  oidc_required: z.boolean(),
  /** accounts must verify their e-mail address before signing in */
  email_verification: z.boolean(),
  frontend: z.boolean(),
  public_stats: z.boolean(),
  /** who may create caches, projects and teams through the API (permissions.create*) */
  create_cache: CreatorRule,
  create_project: CreatorRule,
  create_team: CreatorRule,
  /** bytes */
  max_upload_size: z.number(),
  /** bytes */
  max_request_size: z.number(),
  serve_url: z.string().nullable(),
  frontend_url: z.string().nullable(),
  logo_url: z.string().nullable(),
});
export type ServerConfigView = z.infer<typeof ServerConfigView>;
