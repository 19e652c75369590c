import { CreateApiKeyBody, DeleteApiKeyBody, KeyName, ApiError } from '../../../protocol/index.js';
import type { IdentityServices, Principal } from '../../../services/index.js';
import type { Router } from '../../router.js';

// /user/keys: list, create (the secret is in the answer, once), delete by name (`?name=` or a body
// `{"name": …}`, since some clients cannot send a body with DELETE). Create and delete need a session.

export function userKeysRoutes(r: Router<Principal>, { apiKeys }: Pick<IdentityServices, 'apiKeys'>): void {
  r.get('/user/keys', (req) => apiKeys.list(req.principal));
  r.post('/user/keys', async (req) => apiKeys.create(req.principal, await req.body(CreateApiKeyBody)));
  r.del('/user/keys', async (req) => {
    const fromQuery = req.query.get('name');
    if (fromQuery === null) return apiKeys.delete(req.principal, (await req.body(DeleteApiKeyBody)).name);
    const name = KeyName.safeParse(fromQuery);
    if (!name.success) throw new ApiError('invalid_parameter', 'name: must be 1-100 characters');
    return apiKeys.delete(req.principal, name.data);
  });
}
