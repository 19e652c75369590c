// Request bodies of API key routes: name, permissions, allowed source addresses.
import { isIP } from 'node:net';
import { z } from 'zod';
import { permissionNames } from './permissions.js';

/** An IPv4 or IPv6 block, `addr/bits`; a bare address means that one address. */
export const CidrBlock = z.string().max(64).superRefine((text, ctx) => {
  const [addr = '', bits, extra] = text.split('/');
  const family = isIP(addr);
  const max = family === 4 ? 32 : 128;
  const bitsOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= max);
  if (!family || !bitsOk || extra !== undefined) {
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(text)} is not a CIDR block (e.g. 10.0.0.0/8 or 2001:db8::/32)` });
  }
});

/** The project a key is pinned to: its UUID, or `org/project`. */
const PinnedProject = z.string().min(1).max(127);
export const KeyName = z.string().min(1).max(100);

/** A permission name; the message names the unknown value, not only its index. */
const KeyPermission = z.enum(permissionNames, {
  error: (issue) => `unknown permission ${JSON.stringify(issue.input)} (known: ${permissionNames.join(', ')})`,
});

export const CreateApiKeyBody = z.strictObject({
  name: KeyName,
  permissions: z.array(KeyPermission).min(1, 'must name at least one permission').max(64),
  project: PinnedProject.optional(),
  /** pins the key to one cache, by name */
  cache: z.string().min(1).max(63).optional(),
  expires_in_days: z.number().int().positive().max(36_500).optional(),
  allowed_ips: z.array(CidrBlock).max(100).default([]),
});
export type CreateApiKeyBody = z.infer<typeof CreateApiKeyBody>;

/** DELETE /user/keys: the key's name, in the body or as ?name=. */
export const DeleteApiKeyBody = z.strictObject({ name: KeyName });
export type DeleteApiKeyBody = z.infer<typeof DeleteApiKeyBody>;

const Timestamp = z.iso.datetime({ offset: true });

/** An API key as GET /user/keys lists it: never the secret. */
export const ApiKeyView = z.strictObject({
  id: z.uuid(),
  name: z.string(),
  /** the first characters of the secret, to tell keys apart */
  prefix: z.string(),
  permissions: z.array(z.string()),
  /** `org/project` when pinned to a project */
  project: z.string().nullable(),
  cache: z.string().nullable(),
  allowed_ips: z.array(z.string()),
  expires_at: Timestamp.nullable(),
  last_used_at: Timestamp.nullable(),
  created_at: Timestamp,
  state_managed: z.boolean(),
});
export type ApiKeyView = z.infer<typeof ApiKeyView>;

/** POST /user/keys: the key with its secret, the only time the secret is shown. */
export const CreatedApiKeyView = ApiKeyView.extend({ secret: z.string() });
export type CreatedApiKeyView = z.infer<typeof CreatedApiKeyView>;
