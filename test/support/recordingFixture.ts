// A database ready for the graph recorder's tests: a project with a task, evaluations made on
// demand, and evalBatch messages as a worker sends them.
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../protocol/index.js';
import { testDatabase } from './db.js';
import { insertProject } from './modelRows.js';
import { testEvents } from './testEvents.js';

export async function recordingFixture(t: Test) {
  const db = await testDatabase(t);
  const { events } = await testEvents(t, db);
  const projectId = await insertProject(db.sql, 'acme', 'app');
  const [task] = await db.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  /** a new evaluation of the task, in `phase` */
  const evaluation = async (phase: 'evaluating' | 'building' = 'evaluating'): Promise<string> => {
    const id = randomUUID();
    await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${id}, ${task!.id}, 'file:///nonexistent', '*', ${phase})`;
    return id;
  };
  return { db, events, evaluation };
}

/** An evalBatch of evaluation `evaluationId` with `parts` (nothing else). */
export const evalBatch = (evaluationId: string, parts: Partial<MessageOf<'evalBatch'>>): MessageOf<'evalBatch'> => ({
  v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluationId}:1`, derivations: [], attributes: [], errors: [], ...parts,
});
