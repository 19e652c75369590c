// SCIM 2.0 (RFC 7643/7644) User bodies, as identity providers send them. Objects are not strict:
// providers add attributes of their own (enterprise extension, …), which kiln ignores.
import { z } from 'zod';
import { Username } from './names.js';

export const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const SCIM_LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const SCIM_PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

/** Some providers send booleans as the strings "True"/"False". */
const ScimBoolean = z.union([z.boolean(), z.enum(['true', 'false', 'True', 'False']).transform((s) => s.toLowerCase() === 'true')]);

export const ScimUserBody = z.object({
  schemas: z.array(z.string()).optional(),
  userName: Username,
  externalId: z.string().max(200).optional(),
  displayName: z.string().max(200).optional(),
  name: z
    .object({ formatted: z.string().max(200).optional(), givenName: z.string().max(100).optional(), familyName: z.string().max(100).optional() })
    .optional(),
  emails: z.array(z.object({ value: z.email().max(254), primary: ScimBoolean.optional(), type: z.string().optional() })).max(20).optional(),
  active: ScimBoolean.default(true),
});
export type ScimUserBody = z.infer<typeof ScimUserBody>;

export const ScimPatchBody = z.object({
  schemas: z.array(z.string()).optional(),
  Operations: z
    .array(z.object({ op: z.string().transform((s) => s.toLowerCase()).pipe(z.enum(['add', 'replace', 'remove'])), path: z.string().max(200).optional(), value: z.unknown().optional() }))
    .min(1)
    .max(50),
});
export type ScimPatchBody = z.infer<typeof ScimPatchBody>;

export const ScimBooleanValue = ScimBoolean;
