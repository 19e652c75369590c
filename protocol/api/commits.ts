// GET /commits/{id}'s answer: a commit as the caller's visible evaluations know it (docs/builds.md, "Commits").
import { z } from 'zod';

const Timestamp = z.iso.datetime({ offset: true });

export const CommitView = z.strictObject({
  hash: z.string(),
  /** kiln never fetches the repository itself: null */
  message: z.string().nullable(),
  author: z.string().nullable(),
  repositories: z.array(z.string()),
  evaluations: z.array(z.strictObject({
    id: z.uuid(),
    /** `org/project` */
    project: z.string(),
    task: z.string(),
    phase: z.string(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  })),
});
export type CommitView = z.infer<typeof CommitView>;
