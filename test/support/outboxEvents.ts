// Reading what services wrote to the outbox, step by step: each call answers the events written
// since the previous one.
import type { Sql } from 'postgres';

export interface OutboxEvent {
  event: string;
  content: Record<string, unknown>;
  scope: { organization_id: string | null; project_id: string | null; task_id: string | null; cache_id: string | null; user_id: string | null };
}

export function outboxReader(sql: Sql): () => Promise<OutboxEvent[]> {
  const seen = new Set<string>();
  return async () => {
    const rows = await sql<{ id: string; event: string; body: string; organization_id: string | null; project_id: string | null; task_id: string | null; cache_id: string | null; user_id: string | null }[]>`
      select id, event, body, organization_id, project_id, task_id, cache_id, user_id from event_outbox order by created_at, id`;
    const fresh = rows.filter((r) => !seen.has(r.id));
    for (const r of fresh) seen.add(r.id);
    return fresh
      .map((r) => {
        const envelope = JSON.parse(r.body) as { at: string; content: Record<string, unknown> };
        return { at: envelope.at, event: r.event, content: envelope.content, scope: { organization_id: r.organization_id, project_id: r.project_id, task_id: r.task_id, cache_id: r.cache_id, user_id: r.user_id } };
      })
      .sort((a, b) => a.at.localeCompare(b.at))
      .map(({ at: _, ...e }) => e);
  };
}

/** The names of events, sorted: for steps that emit several events in one transaction. */
export const names = (events: readonly OutboxEvent[]): string[] => events.map((e) => e.event).sort();
