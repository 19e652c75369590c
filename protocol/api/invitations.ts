// Request bodies of invitations and how long an invitation lives.
import { z } from 'zod';
import { Username } from './names.js';
import { Role } from './permissions.js';

/** POST /projects/{project}/users and POST /caches/{cache}/users. */
export const InviteBody = z.strictObject({ user: Username, role: Role });
export type InviteBody = z.infer<typeof InviteBody>;

/** An invitation lasts 7 days (spec, Limits). */
export const INVITATION_LIFETIME_MS = 7 * 24 * 3600 * 1000;
