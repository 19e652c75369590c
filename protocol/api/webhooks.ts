// Request bodies and views of webhooks (/projects/{project}/webhooks, /caches/{cache}/webhooks,
// /admin/webhooks) and task actions (/tasks/{project}/{task}/actions).
import { z } from 'zod';
import { EventGlobs } from '../events/index.js';

/** Where deliveries go: an absolute http(s) URL without credentials (the signature authenticates kiln). */
export const WebhookUrl = z
  .string()
  .max(2000)
  .superRefine((text, ctx) => {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute http:// or https:// URL' });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: `must be an http:// or https:// URL, not ${url.protocol}//` });
    else if (url.hostname === '') ctx.addIssue({ code: 'custom', message: 'must name a host' });
    else if (url.username !== '' || url.password !== '') ctx.addIssue({ code: 'custom', message: 'must not carry a user name or password; receivers authenticate kiln by X-Service-Signature' });
  });

const Description = z.string().max(500);

export const CreateWebhookBody = z.strictObject({
  url: WebhookUrl,
  /** globs such as build.* or task.star; empty: every event in scope */
  events: EventGlobs.default([]),
  active: z.boolean().default(true),
  description: Description.default(''),
});
export type CreateWebhookBody = z.infer<typeof CreateWebhookBody>;

export const UpdateWebhookBody = z.strictObject({
  url: WebhookUrl.optional(),
  events: EventGlobs.optional(),
  active: z.boolean().optional(),
  description: Description.optional(),
});
export type UpdateWebhookBody = z.infer<typeof UpdateWebhookBody>;

export const deliveryStatuses = ['pending', 'attempting', 'retrying', 'delivered', 'dead'] as const;
export const DeliveryStatus = z.enum(deliveryStatuses);
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

/** ?page=&per_page=&status= of a delivery history; pages as in `cache nar list` (50 by default, at most 200). */
export const DeliveryListQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(100_000).default(1),
  per_page: z.coerce.number().int().min(1).max(200).default(50),
  status: DeliveryStatus.optional(),
});
export type DeliveryListQuery = z.infer<typeof DeliveryListQuery>;

const ActionName = z.string().min(1).max(100);
const MailRecipients = z.array(z.email()).min(1).max(20);

/** open_pr: the argv run on a worker in a clone of the evaluated commit (no shell), e.g. ["nix", "flake", "update"] */
const ChangeCommand = z.array(z.string().min(1).max(1000).regex(/^[^\0]*$/, 'no NUL character')).min(1).max(64);
/** A branch name git takes (git check-ref-format's rules, narrowed): no `..`, `//`, `@{`, leading `-` or `/`, trailing `/`, `.` or `.lock`. */
export const BranchName = z.string().min(1).max(200)
  .regex(/^[A-Za-z0-9_][A-Za-z0-9._\/+-]*$/, 'a branch name of letters, digits and . _ / + - (not starting with - . or /)')
  .refine((b) => !b.includes('..') && !b.includes('//') && !b.includes('/.') && !b.endsWith('/') && !b.endsWith('.') && !b.endsWith('.lock'), 'a branch name git takes (no "..", "//", "/.", trailing "/", "." or ".lock")');
/** a commit's author name: one line, no angle brackets (git would refuse or mangle them) */
const CommitName = z.string().min(1).max(200).regex(/^[^<>\x00-\x1f\x7f]+$/, 'one line without < or >');
const CommitEmail = z.email().max(254);

export const CreateTaskActionBody = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('send_web_request'),
    name: ActionName,
    url: WebhookUrl,
    events: EventGlobs.default([]),
    active: z.boolean().default(true),
  }),
  z.strictObject({
    kind: z.literal('send_mail'),
    name: ActionName,
    to: MailRecipients,
    events: EventGlobs.default([]),
    active: z.boolean().default(true),
  }),
  /** runs after each successful evaluation of the task, not for events (docs/git-hosts.md "open_pr") */
  z.strictObject({
    kind: z.literal('open_pr'),
    name: ActionName,
    command: ChangeCommand,
    /** default kiln/<task> */
    branch: BranchName.optional(),
    /** null or absent: pullRequests.commitName / commitEmail */
    commit_name: CommitName.nullable().optional(),
    commit_email: CommitEmail.nullable().optional(),
    active: z.boolean().default(true),
  }),
]);
export type CreateTaskActionBody = z.infer<typeof CreateTaskActionBody>;

/** url only for send_web_request, to only for send_mail, command/branch/commit_* only for open_pr (the service checks against the action's kind). */
export const UpdateTaskActionBody = z.strictObject({
  name: ActionName.optional(),
  url: WebhookUrl.optional(),
  to: MailRecipients.optional(),
  command: ChangeCommand.optional(),
  branch: BranchName.optional(),
  commit_name: CommitName.nullable().optional(),
  commit_email: CommitEmail.nullable().optional(),
  events: EventGlobs.optional(),
  active: z.boolean().optional(),
});
export type UpdateTaskActionBody = z.infer<typeof UpdateTaskActionBody>;


const Timestamp = z.iso.datetime({ offset: true });
const LastDelivery = z.strictObject({ status: z.string(), at: Timestamp }).nullable();

/** A webhook as GET/PATCH …/webhooks answer it; create adds its secret (WebhookWithSecret), once. */
export const WebhookView = z.strictObject({
  id: z.uuid(),
  scope: z.enum(['project', 'cache', 'instance']),
  project: z.string().optional(),
  cache: z.string().optional(),
  url: z.string(),
  events: z.array(z.string()),
  active: z.boolean(),
  description: z.string(),
  created_at: Timestamp,
  updated_at: Timestamp,
  last_delivery: LastDelivery,
});
export type WebhookView = z.infer<typeof WebhookView>;

export const WebhookWithSecret = WebhookView.extend({ secret: z.string() });
export type WebhookWithSecret = z.infer<typeof WebhookWithSecret>;

/** One delivery of a webhook or task action (…/deliveries). */
export const DeliveryView = z.strictObject({
  id: z.uuid(),
  event: z.string(),
  event_id: z.string(),
  status: DeliveryStatus,
  attempts: z.number().int(),
  max_attempts: z.number().int(),
  next_attempt_at: Timestamp.nullable(),
  last_response_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: Timestamp,
  finished_at: Timestamp.nullable(),
});
export type DeliveryView = z.infer<typeof DeliveryView>;

/** One attempt of a delivery: when, and what the receiver answered. */
const AttemptView = z.strictObject({
  attempt: z.number().int(),
  started_at: Timestamp,
  finished_at: Timestamp,
  response_status: z.number().int().nullable(),
  error: z.string().nullable(),
  response_excerpt: z.string().nullable(),
  next_attempt_at: Timestamp.nullable(),
});

/** GET …/deliveries/{delivery}, POST …/test and …/redeliver: a delivery with what was sent and each attempt. */
export const DeliveryDetailView = DeliveryView.extend({
  /** the envelope exactly as sent */
  body: z.unknown(),
  attempt_log: z.array(AttemptView),
});
export type DeliveryDetailView = z.infer<typeof DeliveryDetailView>;

/** GET …/deliveries: one page of the history, newest first. */
export const DeliveryPage = z.strictObject({
  deliveries: z.array(DeliveryView),
  page: z.number().int(),
  per_page: z.number().int(),
  total: z.number().int(),
});
export type DeliveryPage = z.infer<typeof DeliveryPage>;

/**
 * An open_pr action's latest run (docs/git-hosts.md "open_pr"): running, retrying (a try failed,
 * the next at next_attempt_at), or how it ended, with the pull request it opened or updated.
 */
export const OpenPrRunView = z.strictObject({
  id: z.uuid(),
  evaluation_id: z.uuid(),
  status: z.enum(['running', 'retrying', 'opened', 'updated', 'unchanged', 'failed']),
  attempts: z.number().int(),
  pushed: z.string().nullable(),
  pull_request: z.number().int().nullable(),
  pull_request_url: z.string().nullable(),
  error: z.string().nullable(),
  next_attempt_at: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
  finished_at: Timestamp.nullable(),
});
export type OpenPrRunView = z.infer<typeof OpenPrRunView>;

/** A task action as GET /tasks/{project}/{task}/actions answers it. */
export const TaskActionView = z.strictObject({
  id: z.uuid(),
  name: z.string(),
  kind: z.enum(['send_web_request', 'send_mail', 'open_pr']),
  events: z.array(z.string()),
  url: z.string().optional(),
  to: z.array(z.string()).optional(),
  command: z.array(z.string()).optional(),
  branch: z.string().optional(),
  commit_name: z.string().nullable().optional(),
  commit_email: z.string().nullable().optional(),
  /** open_pr only: its latest run, null before the first */
  last_run: OpenPrRunView.nullable().optional(),
  active: z.boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
  last_delivery: LastDelivery,
});
export type TaskActionView = z.infer<typeof TaskActionView>;

/** POST …/actions answers the action with, for send_web_request, its signing secret (shown only then). */
export const TaskActionWithSecret = TaskActionView.extend({ secret: z.string().optional() });
export type TaskActionWithSecret = z.infer<typeof TaskActionWithSecret>;
