// Resolving `{org}/{project}` (or a project's id or unique name) with a permission check.
import type { Permission } from '../../protocol/index.js';
import type { Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { demandProject, demandProjectRef, type ProjectRow } from '../access/index.js';

/** A project named in a form field or query: `org/project`, or a UUID or unique name (DESIGN.md, "The model"). */
export async function demandProjectPath(sql: Queryable, who: Principal, ref: string, permission: Permission): Promise<ProjectRow> {
  const slash = ref.indexOf('/');
  const found = slash < 0
    ? await demandProjectRef(sql, who, ref, permission)
    : await demandProject(sql, who, ref.slice(0, slash), ref.slice(slash + 1), permission);
  return found.row;
}
