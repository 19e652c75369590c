// Account activity: durable, and delivered to instance webhooks only (spec: Events), whatever
// project an API key is pinned to. Never a password, token or key secret.
import { z } from 'zod';
import { Username, Uuid, type Defined } from './eventFields.js';

const Address = z.string().max(64);

function accountEvent<S extends z.ZodType<Record<string, unknown>>>(description: string, content: S): Defined<S> {
  return { family: 'account', durable: 'always', audience: 'instance', description, content };
}

const User = z.looseObject({ user: Username, user_id: Uuid });

export const accountEventDefinitions = {
  'login.success': accountEvent('a user signed in', z.looseObject({ user: Username, user_id: Uuid, method: z.enum(['password', 'oidc']), address: Address.optional() })),
  'login.failure': accountEvent('a sign-in was refused', z.looseObject({ loginname: z.string().max(254), reason: z.string().max(200), address: Address.optional() })),
  'session.revoke': accountEvent('a session ended before its expiry (logout, account change, admin)', z.looseObject({ user: Username, user_id: Uuid, session_id: Uuid, reason: z.string().max(64).optional() })),
  'api_key.create': accountEvent('an API key was created', z.looseObject({ user: Username, user_id: Uuid, key_id: Uuid, name: z.string().max(100), permissions: z.array(z.string()).optional(), project: z.string().max(127).optional() })),
  'api_key.delete': accountEvent('an API key was deleted', z.looseObject({ user: Username, user_id: Uuid, key_id: Uuid, name: z.string().max(100) })),
  'user.create': accountEvent('an account was created (registration, OIDC, SCIM or state file)', User),
  'user.update': accountEvent('an account\'s profile, state or superuser flag changed', User),
  'user.delete': accountEvent('an account was deleted', User),
};
