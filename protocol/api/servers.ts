// Request bodies and views of build server routes.
import { z } from 'zod';
import { ResourceName } from './names.js';

// Neither may start with '-': ssh would read the user name or host as one of its own options.
const Host = z.string().min(1).max(253).regex(/^[A-Za-z0-9.:_\[\]][A-Za-z0-9.:_\[\]-]*$/, 'must be a host name or an IP address (not starting with -)');
const UserName = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.][A-Za-z0-9_.-]*$/, 'must be a user name (not starting with -)');
const SystemName = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.-]+$/, 'must be a system name such as x86_64-linux');
const Feature = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.-]+$/, 'must be a feature name such as kvm');

export const CreateServerBody = z.strictObject({
  name: ResourceName,
  host: Host,
  port: z.number().int().min(1).max(65535).optional(),
  username: UserName.optional(),
  architectures: z.array(SystemName).max(32).optional(),
  features: z.array(Feature).max(64).optional(),
  max_jobs: z.number().int().min(1).max(1024).optional(),
});
export type CreateServerBody = z.infer<typeof CreateServerBody>;

export const UpdateServerBody = CreateServerBody.omit({ name: true }).partial();
export type UpdateServerBody = z.infer<typeof UpdateServerBody>;

/** A build server as GET/PUT/PATCH /servers/{org}… answer it. */
export const ServerView = z.strictObject({
  id: z.uuid(),
  organization: z.string(),
  name: ResourceName,
  host: z.string(),
  port: z.number().int(),
  username: z.string(),
  architectures: z.array(z.string()),
  features: z.array(z.string()),
  max_jobs: z.number().int(),
  active: z.boolean(),
  /** the pinned host key's fingerprint (SHA256:…); null until a check-connection succeeds, and no builds go there before */
  host_key_fingerprint: z.string().nullable(),
  host_key_pinned_at: z.iso.datetime({ offset: true }).nullable(),
  created_at: z.iso.datetime({ offset: true }),
});
export type ServerView = z.infer<typeof ServerView>;

/**
 * POST /servers/{org}/{server}/check-connection: the host key kiln saw and Nix's version, or why it
 * failed. A check that is ok pins the key it saw; host_key_changed says it differs from the key
 * pinned before (which an ok check has now replaced).
 */
export const ConnectionCheck = z.union([
  z.strictObject({ ok: z.literal(true), host_key_fingerprint: z.string(), nix_version: z.string().nullable(), host_key_changed: z.boolean() }),
  z.strictObject({ ok: z.literal(false), host_key_fingerprint: z.string().nullable(), reason: z.string(), host_key_changed: z.boolean() }),
]);
export type ConnectionCheck = z.infer<typeof ConnectionCheck>;
