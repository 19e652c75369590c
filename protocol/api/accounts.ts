// Request bodies of /auth/* and /user/settings. Bounds match the users table's checks, so a body
// that passes here cannot fail on a constraint later.
import { z } from 'zod';
import { Username } from './names.js';

export const DisplayName = z.string().max(200);
export const Email = z.email('must be an e-mail address').max(254);
/** argon2 takes any length; the cap keeps a hashing request from being a denial of service. */
export const Password = z.string().min(8, 'must be at least 8 characters').max(1024);

export const RegisterBody = z.strictObject({
  username: Username,
  name: DisplayName.default(''),
  email: Email,
  password: Password,
});
export type RegisterBody = z.infer<typeof RegisterBody>;

export const LoginBody = z.strictObject({
  /** the username or the e-mail address */
  loginname: z.string().min(1).max(254),
  password: z.string().min(1).max(1024),
});
export type LoginBody = z.infer<typeof LoginBody>;

export const CheckUsernameBody = z.strictObject({ username: Username });
export type CheckUsernameBody = z.infer<typeof CheckUsernameBody>;

export const ResendVerificationBody = z.strictObject({ email: Email });
export type ResendVerificationBody = z.infer<typeof ResendVerificationBody>;

/** Free-form profile preferences kept for clients (the web UI's theme, …); 32 keys at most. */
export const Preferences = z
  .record(z.string().max(64), z.union([z.string().max(1000), z.number(), z.boolean(), z.null()]))
  .refine((r) => Object.keys(r).length <= 32, 'at most 32 preferences');

export const SettingsPatch = z
  .strictObject({
    name: DisplayName.optional(),
    email: Email.optional(),
    /** needed, and checked, when new_password is given */
    current_password: z.string().min(1).max(1024).optional(),
    new_password: Password.optional(),
    /** merged into the stored preferences; a null value removes that key */
    preferences: Preferences.optional(),
  })
  .refine((b) => b.new_password === undefined || b.current_password !== undefined, {
    path: ['current_password'],
    message: 'is required to set new_password',
  });
export type SettingsPatch = z.infer<typeof SettingsPatch>;

/** GET /user: the signed-in account. */
export const UserView = z.strictObject({
  id: z.uuid(),
  username: z.string(),
  name: z.string(),
  email: z.string().nullable(),
  email_verified: z.boolean(),
  superuser: z.boolean(),
  /** whether the account can sign in with a password (OIDC-only accounts cannot) */
  has_password: z.boolean(),
  oidc_linked: z.boolean(),
  state_managed: z.boolean(),
  created_at: z.iso.datetime({ offset: true }),
});
export type UserView = z.infer<typeof UserView>;

/** GET and PATCH /user/settings. */
export const UserSettingsView = z.strictObject({
  username: z.string(),
  name: z.string(),
  email: z.string().nullable(),
  email_verified: z.boolean(),
  has_password: z.boolean(),
  preferences: z.record(z.string(), z.unknown()),
});
export type UserSettingsView = z.infer<typeof UserSettingsView>;

/** POST /auth/basic/register: the new account, and what became of its verification e-mail. */
export const RegisteredView = UserView.extend({
  /** sent, skipped (no SMTP configured) or failed */
  verification_email: z.enum(['sent', 'skipped', 'failed']),
});
export type RegisteredView = z.infer<typeof RegisteredView>;

/** POST /auth/check-username. */
export const UsernameAvailability = z.strictObject({ username: z.string(), available: z.boolean() });
export type UsernameAvailability = z.infer<typeof UsernameAvailability>;
