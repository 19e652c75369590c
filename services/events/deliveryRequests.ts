// What one claimed attempt sends: a signed POST for webhooks and send_web_request actions, an
// e-mail for send_mail actions. The body is the stored envelope, byte for byte, on every attempt.
import type { DeliveryInput, DeliveryRequest } from '../../actors/index.js';
import { signBody } from '../../protocol/index.js';
import type { ClaimedRow } from '../../storage/index.js';

/** A task action's run, reported as task.action.update once recorded. */
export interface TaskActionReport {
  actionId: string;
  action: string;
  kind: 'send_web_request' | 'send_mail';
  taskId: string;
  task: string;
  projectId: string;
  project: string;
}

export interface AttemptPlan {
  input: DeliveryInput;
  report: TaskActionReport | null;
}

export interface RequestContext {
  /** the plain signing secret of a sealed one */
  openSecret(sealed: Buffer): string;
  userAgent: string;
  now(): number;
}

export type PlanResult = { ok: true; plan: AttemptPlan } | { ok: false; reason: string; report: TaskActionReport | null };

export function planAttempt(row: ClaimedRow, ctx: RequestContext): PlanResult {
  const report = actionReport(row);
  const active = row.webhook_id !== null ? row.webhook_active : row.action_active;
  const what = row.webhook_id !== null ? 'webhook' : 'task action';
  if (active !== true) return { ok: false, reason: `the ${what} was disabled before this attempt`, report };
  let request: DeliveryRequest;
  try {
    request = row.action_kind === 'send_mail' ? mailRequest(row) : webRequest(row, ctx);
  } catch (error) {
    return { ok: false, reason: `cannot prepare the request: ${error instanceof Error ? error.message : String(error)}`, report };
  }
  return {
    ok: true,
    plan: {
      report,
      input: {
        deliveryId: row.id,
        attempt: row.attempt,
        maxAttempts: row.max_attempts,
        event: row.event,
        target: row.webhook_id !== null ? 'webhook' : row.action_kind!,
        request,
        startedAt: ctx.now(),
      },
    },
  };
}

function webRequest(row: ClaimedRow, ctx: RequestContext): DeliveryRequest {
  const url = row.webhook_url ?? row.action_url;
  const sealed = row.webhook_secret ?? row.action_secret;
  if (!url || !sealed) throw new Error('the target has no URL or no signing secret');
  return {
    kind: 'web',
    url,
    body: row.body,
    headers: {
      'content-type': 'application/json',
      'user-agent': ctx.userAgent,
      'x-service-event': row.event,
      'x-service-delivery': row.id,
      'x-service-attempt': String(row.attempt),
      'x-service-signature': signBody(ctx.openSecret(sealed), row.body),
    },
  };
}

function mailRequest(row: ClaimedRow): DeliveryRequest {
  const to = row.mail_to ?? [];
  if (to.length === 0) throw new Error('the action has no recipients');
  const where = row.project_label && row.task_name ? ` ${row.project_label}/${row.task_name}` : '';
  const envelope = JSON.parse(row.body) as unknown;
  return {
    kind: 'mail',
    to,
    subject: `[kiln] ${row.event}${where}`,
    text: `${row.event}${where}\n\nTask action "${row.action_name ?? ''}" received this event:\n\n${JSON.stringify(envelope, null, 2)}\n\nDelivery ${row.id}, attempt ${row.attempt}.\n`,
  };
}

function actionReport(row: ClaimedRow): TaskActionReport | null {
  if (row.task_action_id === null || !row.action_kind || !row.task_id || !row.project_id) return null;
  return {
    actionId: row.task_action_id,
    action: row.action_name ?? '',
    kind: row.action_kind,
    taskId: row.task_id,
    task: row.task_name ?? '',
    projectId: row.project_id,
    project: row.project_label ?? '',
  };
}
