// Request bodies and the view of invitations, and how long an invitation lives.
import { z } from 'zod';
import { Username } from './names.js';
import { Role } from './permissions.js';

/** POST /projects/{project}/users and POST /caches/{cache}/users. */
export const InviteBody = z.strictObject({ user: Username, role: Role });
export type InviteBody = z.infer<typeof InviteBody>;

/** An invitation lasts 7 days (spec, Limits). */
export const INVITATION_LIFETIME_MS = 7 * 24 * 3600 * 1000;

const Timestamp = z.iso.datetime({ offset: true });

/** An open invitation, as /user/invitations and the project's or cache's /invitations list it. */
export const InvitationView = z.strictObject({
  id: z.uuid(),
  /** `org/project`, or null for a cache invitation */
  project: z.string().nullable(),
  cache: z.string().nullable(),
  /** the invited username */
  user: z.string(),
  role: Role,
  inviter: z.string().nullable(),
  created_at: Timestamp,
  expires_at: Timestamp,
});
export type InvitationView = z.infer<typeof InvitationView>;
