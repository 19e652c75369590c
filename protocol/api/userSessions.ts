// /user/sessions (kiln extension, docs/auth.md "Sessions"): the caller's own sign-in sessions as
// GET lists them, and the session id DELETE /user/sessions/{session} takes.
import { z } from 'zod';

const Timestamp = z.iso.datetime({ offset: true });

/** The `{session}` path parameter: a session's id. */
export const SessionId = z.uuid('a session id is a UUID');

/** One of the caller's sessions that is neither revoked nor expired. */
export const UserSessionView = z.strictObject({
  id: z.uuid(),
  /** the sign-in */
  created_at: Timestamp,
  /** the last request made with it, to the minute; null before the first after sign-in */
  last_used_at: Timestamp.nullable(),
  expires_at: Timestamp,
  /** the User-Agent of the sign-in, cut to 500 characters */
  user_agent: z.string().nullable(),
  /** the client address of the sign-in */
  address: z.string().nullable(),
  /** the session making this request */
  current: z.boolean(),
});
export type UserSessionView = z.infer<typeof UserSessionView>;
