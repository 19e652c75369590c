// /user and /user/settings: the signed-in account. Deleting it and changing settings need a session.
import { SettingsPatch } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function userRoutes(r: Router<Principal>, { identity: { profile } }: Pick<Services, 'identity'>): void {
  r.get('/user', (req) => profile.get(req.principal));
  r.del('/user', (req) => profile.delete(req.principal));
  r.get('/user/settings', (req) => profile.getSettings(req.principal));
  r.patch('/user/settings', async (req) => profile.patchSettings(req.principal, await req.body(SettingsPatch)));
}
