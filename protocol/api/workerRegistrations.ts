import { z } from 'zod';

/** POST /projects/{project}/workers. */
export const RegisterWorkerBody = z.strictObject({
  name: z.string().max(100).optional(),
  /** the worker UUID the token is for; absent: any worker presenting it */
  worker_id: z.uuid().optional(),
});
export type RegisterWorkerBody = z.infer<typeof RegisterWorkerBody>;
