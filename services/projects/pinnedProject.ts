// Which project an API key's `project` field names: a UUID, `org/project`, or a project name that
// only one organization uses (DESIGN.md, "The model"). A direct query for now; when the access
// services resolve project references with visibility rules, pass theirs to apiKeysService instead.
import type { Sql } from '../../storage/index.js';

export interface PinnedProject {
  id: string;
  /** `org/project` */
  name: string;
}

export type ResolvePinnedProject = (ref: string, userId: string) => Promise<PinnedProject | null>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function projectResolver(sql: Sql): ResolvePinnedProject {
  return async (ref) => {
    const slash = ref.indexOf('/');
    const rows = UUID.test(ref)
      ? await sql<PinnedProject[]>`
          select p.id, o.name || '/' || p.name as name from projects p join organizations o on o.id = p.organization_id where p.id = ${ref}`
      : slash > 0
        ? await sql<PinnedProject[]>`
            select p.id, o.name || '/' || p.name as name from projects p join organizations o on o.id = p.organization_id
            where o.name = ${ref.slice(0, slash)} and p.name = ${ref.slice(slash + 1)}`
        : await sql<PinnedProject[]>`
            select p.id, o.name || '/' || p.name as name from projects p join organizations o on o.id = p.organization_id
            where p.name = ${ref} limit 2`;
    return rows.length === 1 ? rows[0]! : null;
  };
}
