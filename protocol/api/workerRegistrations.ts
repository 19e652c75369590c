// Request bodies and views of worker peer token routes.
import { z } from 'zod';

/** POST /projects/{project}/workers. */
export const RegisterWorkerBody = z.strictObject({
  name: z.string().max(100).optional(),
  /** the worker UUID the token is for; absent: whichever worker presents it */
  worker_id: z.uuid().optional(),
  /** a discoverable worker's /proto URL (ws:// or wss://): the server connects to it */
  endpoint: z.string().max(2000).regex(/^wss?:\/\/[^/?#@\s]+(\/[^?#\s]*)?$/, 'a ws:// or wss:// URL without credentials').optional(),
  /** the token the server presents to that worker (its worker.acceptedServerTokensFile holds the hash); needs endpoint */
  server_token: z.string().min(16).max(1000).optional(),
}).refine((b) => b.server_token === undefined || b.endpoint !== undefined, { message: 'server_token is only used with endpoint', path: ['server_token'] });
export type RegisterWorkerBody = z.infer<typeof RegisterWorkerBody>;

/** A worker peer token's record (GET /projects/{project}/workers); the token itself is never listed. */
export const WorkerRegistrationView = z.strictObject({
  id: z.uuid(),
  name: z.string(),
  worker_id: z.uuid().nullable(),
  /** a discoverable worker's /proto URL the server connects to; null: the worker connects */
  endpoint: z.string().nullable(),
  created_by: z.string().nullable(),
  created_at: z.iso.datetime({ offset: true }),
});
export type WorkerRegistrationView = z.infer<typeof WorkerRegistrationView>;

/** POST /projects/{project}/workers: the record with the peer token, shown this once. */
export const NewWorkerRegistration = WorkerRegistrationView.extend({ token: z.string() });
export type NewWorkerRegistration = z.infer<typeof NewWorkerRegistration>;
