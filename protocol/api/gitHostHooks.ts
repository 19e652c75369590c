// The Git host application's webhooks (GitHub's App protocol; Gitea and Forgejo send the same
// shapes): the headers POST /api/v1/hooks/github reads and the fields of each event kiln uses.
// Payloads carry much more; only what is read is checked, and a signed payload lacking one of
// these fields is refused as a whole (400 invalid_webhook, docs/git-hosts.md).
// The compile-time checks at the end hold these schemas to @octokit/webhooks' payload types, so
// a field kiln reads under a name or type the host does not send fails the type check.
import type { EmitterWebhookEvent } from '@octokit/webhooks';
import { z } from 'zod';

/** X-Hub-Signature-256: `sha256=` and the HMAC-SHA256 of the body in lowercase hex */
export const HubSignature = z.string().regex(/^sha256=[0-9a-f]{64}$/, 'expected sha256= and 64 lowercase hex digits');
/** X-GitHub-Event: an event name such as push or pull_request */
export const HookEventName = z.string().regex(/^[a-z][a-z_]{0,63}$/, 'expected an event name such as push');
/** X-GitHub-Delivery: the delivery's id (a UUID at GitHub, any token elsewhere); a redelivery keeps it */
export const HookDeliveryId = z.string().regex(/^[A-Za-z0-9._-]{1,200}$/, 'expected the delivery id (letters, digits, ".", "_", "-")');

const Sha = z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'a commit is 40 or 64 lowercase hex digits');
const HostId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const FullName = z.string().regex(/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,200}$/, 'expected owner/name');

/** The repository an event is about; its git URLs are what projects are matched against. */
const HookRepository = z.object({
  id: HostId,
  full_name: FullName,
  default_branch: z.string().min(1).max(255),
  clone_url: z.string().max(2000).optional(),
  html_url: z.string().max(2000).optional(),
  ssh_url: z.string().max(2000).optional(),
  git_url: z.string().max(2000).optional(),
});
export type HookRepository = z.infer<typeof HookRepository>;

/** Present when the event comes through the application (not a plain repository webhook). */
const HookInstallationRef = z.object({ id: HostId });

export const PushHook = z.object({
  ref: z.string().min(1).max(1000),
  after: Sha,
  deleted: z.boolean().optional(),
  repository: HookRepository,
  installation: HookInstallationRef.optional(),
});
export type PushHook = z.infer<typeof PushHook>;

export const PullRequestHook = z.object({
  action: z.string().min(1).max(64),
  number: HostId.max(2_147_483_647),
  pull_request: z.object({
    head: z.object({
      sha: Sha,
      ref: z.string().min(1).max(255),
      /** the repository the head branch lives in: another one (a fork) or none (a deleted fork) starts nothing */
      repo: z.object({ id: HostId }).nullable().optional(),
    }),
    base: z.object({ ref: z.string().min(1).max(255) }),
    /** on `closed`: whether it was merged (the reason an aborted evaluation gives) */
    merged: z.boolean().nullable().optional(),
  }),
  repository: HookRepository,
  installation: HookInstallationRef.optional(),
});
export type PullRequestHook = z.infer<typeof PullRequestHook>;

const HookInstallation = z.object({
  id: HostId,
  account: z.object({ login: z.string().min(1).max(200) }),
});
const RepositoryRef = z.object({ id: HostId, full_name: FullName });

export const InstallationHook = z.object({
  action: z.string().min(1).max(64),
  installation: HookInstallation,
  repositories: z.array(RepositoryRef).max(100_000).optional(),
});
export type InstallationHook = z.infer<typeof InstallationHook>;

export const InstallationRepositoriesHook = z.object({
  action: z.string().min(1).max(64),
  installation: HookInstallation,
  repositories_added: z.array(RepositoryRef).max(100_000),
  repositories_removed: z.array(RepositoryRef).max(100_000),
});
export type InstallationRepositoriesHook = z.infer<typeof InstallationRepositoriesHook>;

// What the host sends must be assignable to what kiln reads (a renamed or retyped field is a type error here).
type Fits<Sent extends Read, Read> = Sent;
type Payload<E extends 'push' | 'pull_request.opened' | 'installation.created' | 'installation_repositories.added'> = EmitterWebhookEvent<E>['payload'];
type HostPayloadsFit = [
  Fits<Pick<Payload<'push'>, 'ref' | 'after' | 'deleted'>, Pick<PushHook, 'ref' | 'after' | 'deleted'>>,
  Fits<Pick<Payload<'push'>['repository'], 'id' | 'full_name' | 'default_branch' | 'clone_url'>, Pick<HookRepository, 'id' | 'full_name' | 'default_branch' | 'clone_url'>>,
  Fits<Pick<Payload<'pull_request.opened'>, 'action' | 'number'>, Pick<PullRequestHook, 'action' | 'number'>>,
  Fits<Pick<Payload<'pull_request.opened'>['pull_request']['head'], 'sha' | 'ref'>, PullRequestHook['pull_request']['head']>,
  Fits<Pick<Payload<'installation.created'>['installation'], 'id'>, Pick<InstallationHook['installation'], 'id'>>,
  Fits<Pick<NonNullable<Payload<'installation_repositories.added'>['repositories_added'][number]>, 'id' | 'full_name'>, InstallationRepositoriesHook['repositories_added'][number]>,
];

/** POST /hooks/github's answer: the delivery, and the evaluations it started. */
export const HookOutcomeView = z.strictObject({
  delivery: z.string(),
  event: z.string(),
  /** the delivery was seen before: nothing was done again */
  duplicate: z.boolean(),
  evaluations: z.array(z.uuid()),
});
export type HookOutcomeView = z.infer<typeof HookOutcomeView>;
