// SCIM 2.0 Users at /scim/v2/Users (RFC 7644), outside /api/v1: SCIM's own bearer token, SCIM's
// media type, and SCIM's error body instead of kiln's envelope.
import { ApiError, isApiError, SCIM_ERROR_SCHEMA, ScimPatchBody, ScimUserBody } from '../../protocol/index.js';
import type { Principal, Services } from '../../services/index.js';
import { bytesReply, emptyReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';

const scimJson = (status: number, body: unknown): Reply => bytesReply(status, JSON.stringify(body), { 'Content-Type': 'application/scim+json' });

/** RFC 7644 §3.12 scimType for a kiln error code. */
const scimTypes: Record<string, string> = {
  username_taken: 'uniqueness',
  email_taken: 'uniqueness',
  invalid_filter: 'invalidFilter',
  invalid_scim_path: 'invalidPath',
  invalid_body: 'invalidValue',
  invalid_json: 'invalidSyntax',
};

function scimError(e: ApiError): Reply {
  const scimType = scimTypes[e.code];
  return scimJson(e.status, { schemas: [SCIM_ERROR_SCHEMA], status: String(e.status), ...(scimType ? { scimType } : {}), detail: e.message });
}

export function scimRoutes(root: Router<Principal>, { identity: { scim } }: Pick<Services, 'identity'>): void {
  const r = root.scope('/scim/v2', { auth: 'none' });
  const handle = (work: (req: Req<Principal>) => Promise<Reply>) => async (req: Req<Principal>): Promise<Reply> => {
    try {
      scim.checkToken(req.header('authorization'));
      return await work(req);
    } catch (e) {
      if (isApiError(e)) return scimError(e);
      throw e;
    }
  };
  r.get('/Users', handle(async (req) => scimJson(200, await scim.list(req.searchParams))));
  r.get('/Users/:id', handle(async (req) => scimJson(200, await scim.get(req.param('id')))));
  r.post('/Users', handle(async (req) => scimJson(201, await scim.create(await req.body(ScimUserBody)))));
  r.put('/Users/:id', handle(async (req) => scimJson(200, await scim.replace(req.param('id'), await req.body(ScimUserBody)))));
  r.patch('/Users/:id', handle(async (req) => scimJson(200, await scim.patch(req.param('id'), await req.body(ScimPatchBody)))));
  r.del('/Users/:id', handle(async (req) => {
    await scim.delete(req.param('id'));
    return emptyReply(204);
  }));
}
