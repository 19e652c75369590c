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
