// /user/keys: list, create (the secret is in the answer, once), delete by name (`?name=` or a body
// `{"name": …}`, since some clients cannot send a body with DELETE). Create and delete need a session.
import { z } from 'zod';
import { CreateApiKeyBody, DeleteApiKeyBody, KeyName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export const DeleteKeyQuery = z.object({ name: KeyName.optional() });

export function userKeysRoutes(r: Router<Principal>, { identity: { apiKeys } }: Pick<Services, 'identity'>): void {
  r.get('/user/keys', (req) => apiKeys.list(req.principal));
  r.post('/user/keys', async (req) => apiKeys.create(req.principal, await req.body(CreateApiKeyBody)));
  r.del('/user/keys', async (req) => {
    const { name } = req.query(DeleteKeyQuery);
    return apiKeys.delete(req.principal, name ?? (await req.body(DeleteApiKeyBody)).name);
  });
}
