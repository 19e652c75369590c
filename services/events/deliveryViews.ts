// Deliveries as the API shows them (webhook and task action histories alike).
import { ApiError, type DeliveryListQuery } from '../../protocol/index.js';
import type { AttemptRow, DeliveryRow } from '../../storage/index.js';

export interface DeliveryView {
  id: string;
  event: string;
  event_id: string;
  /** pending, attempting, retrying, delivered or dead */
  status: string;
  attempts: number;
  max_attempts: number;
  next_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

export interface DeliveryDetail extends DeliveryView {
  /** the envelope exactly as sent (parsed) */
  body: unknown;
  attempt_log: AttemptRow[];
}

export interface DeliveryPage {
  deliveries: DeliveryView[];
  page: number;
  per_page: number;
  total: number;
}

export const toDeliveryView = (row: DeliveryRow): DeliveryView => ({
  id: row.id,
  event: row.event,
  event_id: row.event_id,
  status: row.status,
  attempts: row.attempts,
  max_attempts: row.max_attempts,
  next_attempt_at: row.next_attempt_at,
  last_response_status: row.last_response_status,
  last_error: row.last_error,
  created_at: row.created_at,
  finished_at: row.finished_at,
});

export function toDeliveryDetail(row: DeliveryRow & { body: string; attempt_log: AttemptRow[] }): DeliveryDetail {
  return { ...toDeliveryView(row), body: JSON.parse(row.body) as unknown, attempt_log: row.attempt_log };
}

export const pageOf = (q: DeliveryListQuery) => ({ limit: q.per_page, offset: (q.page - 1) * q.per_page, ...(q.status ? { status: q.status } : {}) });

export const deliveryNotFound = (id: string): ApiError => new ApiError('not_found', `no delivery ${id}`);
