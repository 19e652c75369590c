// /user/ssh-keys (kiln extension, docs/ssh.md): list, add and delete the public keys kiln's SSH
// server logs the caller in by. Delete by name (`?name=` or a body), as /user/keys does.
import { z } from 'zod';
import { AddSshKeyBody, DeleteSshKeyBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export const DeleteSshKeyQuery = z.object({ name: z.string().min(1).max(100).optional() });

export function userSshKeysRoutes(r: Router<Principal>, { ssh: { keys } }: Pick<Services, 'ssh'>): void {
  r.get('/user/ssh-keys', (req) => keys.list(req.principal));
  r.post('/user/ssh-keys', async (req) => keys.add(req.principal, await req.body(AddSshKeyBody)));
  r.del('/user/ssh-keys', async (req) => {
    const { name } = req.query(DeleteSshKeyQuery);
    return keys.delete(req.principal, name ?? (await req.body(DeleteSshKeyBody)).name);
  });
}
