// Rows the identity tests point keys at (an organization, a project, a cache), written with SQL so
// these tests do not depend on the organization and cache services.
import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';

export async function insertProject(sql: Sql, org: string, project: string): Promise<string> {
  const [o] = await sql<{ id: string }[]>`
    insert into organizations (name, ssh_public_key, ssh_private_key) values (${org}, 'ssh-ed25519 AAAA test', ${randomBytes(32)})
    on conflict (name) do update set name = excluded.name returning id`;
  const [p] = await sql<{ id: string }[]>`
    insert into projects (organization_id, name, repository) values (${o!.id}, ${project}, 'file:///dev/null') returning id`;
  return p!.id;
}

export async function insertCache(sql: Sql, name: string): Promise<string> {
  const [c] = await sql<{ id: string }[]>`
    insert into caches (name, key_name, public_key, secret_key) values (${name}, ${`test-${name}-1`}, ${randomBytes(32)}, ${randomBytes(64)}) returning id`;
  return c!.id;
}

/** A finished evaluation `evaluationId` of the task (the scheduler leaves it alone) with one completed build `buildId`. */
export async function insertFinishedBuild(sql: Sql, ids: { taskId: string; evaluationId: string; buildId: string }, name = 'live'): Promise<void> {
  await insertFinishedEvaluation(sql, ids.taskId, ids.evaluationId);
  const hash = randomBytes(16).toString('hex');
  const [drv] = await sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
    values (${`/nix/store/${hash}-${name}.drv`}, ${name}, 'x86_64-linux', ${sql.json({ out: `/nix/store/${hash}-${name}` })}) returning id`;
  const [built] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${drv!.id}, 'completed', 1) returning id`;
  await sql`insert into builds (id, evaluation_id, derivation_build_id, entry_point, attr) values (${ids.buildId}, ${ids.evaluationId}, ${built!.id}, true, ${`packages.${name}`})`;
}

/** A finished evaluation `evaluationId` of the task, without builds. */
export async function insertFinishedEvaluation(sql: Sql, taskId: string, evaluationId: string): Promise<void> {
  await sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${evaluationId}, ${taskId}, 'file:///nonexistent', '*', 'completed')`;
}
