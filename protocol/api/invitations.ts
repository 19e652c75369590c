// Request bodies and the view of invitations, and how long an invitation lives.
import { z } from 'zod';
import { Username } from './names.js';
import { Role } from './permissions.js';

/** POST /projects/{project}/users and POST /caches/{cache}/users. */
export const InviteBody = z.strictObject({ user: Username, role: Role });
export type InviteBody = z.infer<typeof InviteBody>;

/** An invitation lasts 7 days (spec, Limits). */
export const INVITATION_LIFETIME_MS = 7 * 24 * 3600 * 1000;

/** An open invitation (pending lists, My invites). */
export const InvitationView = z.strictObject({
  id: z.uuid(),
  /** `org/project`, or null for a cache invitation */
  project: z.string().nullable(),
  cache: z.string().nullable(),
  user: z.string(),
  role: z.string(),
  inviter: z.string().nullable(),
  created_at: z.iso.datetime({ offset: true }),
  expires_at: z.iso.datetime({ offset: true }),
});
export type InvitationView = z.infer<typeof InvitationView>;
