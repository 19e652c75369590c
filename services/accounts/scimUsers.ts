// Between kiln's users table and the SCIM User resource (RFC 7643 §4.1).
import { SCIM_USER_SCHEMA, type ScimUserBody } from '../../protocol/index.js';
import type { UserRow } from './userView.js';

export interface ScimUser {
  schemas: string[];
  id: string;
  externalId?: string;
  userName: string;
  displayName: string;
  name: { formatted: string };
  emails: { value: string; primary: boolean }[];
  active: boolean;
  meta: { resourceType: 'User'; created: string; lastModified: string; location: string };
}

export function toScimUser(row: UserRow, baseUrl: string): ScimUser {
  return {
    schemas: [SCIM_USER_SCHEMA],
    id: row.id,
    ...(row.scim_external_id ? { externalId: row.scim_external_id } : {}),
    userName: row.username,
    displayName: row.name,
    name: { formatted: row.name },
    emails: row.email ? [{ value: row.email, primary: true }] : [],
    active: !row.disabled,
    meta: { resourceType: 'User', created: row.created_at.toISOString(), lastModified: row.updated_at.toISOString(), location: `${baseUrl}/Users/${row.id}` },
  };
}

/** The columns a SCIM body sets. */
export interface ScimUserFields {
  username: string;
  name: string;
  email: string | null;
  active: boolean;
  externalId: string | null;
}

export function fieldsOf(body: ScimUserBody): ScimUserFields {
  const given = [body.name?.givenName, body.name?.familyName].filter(Boolean).join(' ');
  const email = body.emails?.find((e) => e.primary === true) ?? body.emails?.[0];
  return {
    username: body.userName,
    name: body.displayName ?? body.name?.formatted ?? given,
    email: email?.value ?? null,
    active: body.active,
    externalId: body.externalId ?? null,
  };
}

/** `userName eq "x"` or `externalId eq "x"` (attribute names are case-insensitive in SCIM). */
export function parseScimFilter(filter: string): { attribute: 'userName' | 'externalId'; value: string } | null {
  const m = /^\s*(userName|externalId)\s+eq\s+"((?:[^"\\]|\\.)*)"\s*$/i.exec(filter);
  if (!m) return null;
  return { attribute: m[1]!.toLowerCase() === 'username' ? 'userName' : 'externalId', value: m[2]!.replace(/\\(.)/g, '$1') };
}
