// Finding an organization, project or cache by the names in a path, together with the caller's
// role on it, in one query each. `demand…` adds the permission check: 404 when missing or not
// visible, 403 when visible without the permission.
import type { Permission, Role } from '../../protocol/index.js';
import { cacheRowById, cacheRowNamed, type CacheRow } from '../../storage/index.js';
import { accessOf, demand, notFound, type Access, type AccessTarget } from './access.js';
import type { Principal } from './principal.js';
import type { Queryable } from '../../storage/index.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID.test(s);

export type { CacheRow };

export const userOf = (who: Principal): string | null => (who.kind === 'user' ? who.userId : null);

export interface OrganizationRow {
  id: string;
  name: string;
  display_name: string;
  description: string;
  ssh_public_key: string;
  state_managed: boolean;
  created_at: Date;
  role: Role | null;
}

export interface ProjectRow {
  id: string;
  organization_id: string;
  organization: string;
  name: string;
  display_name: string;
  description: string;
  repository: string;
  wildcard: string;
  default_branch: string | null;
  poll_interval_secs: number | null;
  cancel_superseded: boolean;
  requires_approval: boolean;
  active: boolean;
  state_managed: boolean;
  created_at: Date;
  role: Role | null;
}

export interface Found<Row> {
  row: Row;
  target: AccessTarget;
  access: Access;
}

export const organizationTarget = (row: OrganizationRow): AccessTarget => ({
  scope: 'organization', id: row.id, label: `organization "${row.name}"`, role: row.role,
});
export const projectTarget = (row: ProjectRow): AccessTarget => ({
  scope: 'project', id: row.id, label: `project "${row.organization}/${row.name}"`, role: row.role,
});
export const cacheTarget = (row: CacheRow): AccessTarget => ({
  scope: 'cache', id: row.id, label: `cache "${row.name}"`, role: row.role, public: row.public,
});

export async function findOrganization(sql: Queryable, who: Principal, name: string): Promise<OrganizationRow | null> {
  const [row] = await sql<OrganizationRow[]>`
    select o.id, o.name, o.display_name, o.description, o.ssh_public_key, o.state_managed, o.created_at, m.role
    from organizations o
    left join organization_members m on m.organization_id = o.id and m.user_id = ${userOf(who)}
    where o.name = ${name}`;
  return row ?? null;
}

const projectColumns = (sql: Queryable, who: Principal) => sql`
  select p.id, p.organization_id, o.name as organization, p.name, p.display_name, p.description, p.repository,
         p.wildcard, p.default_branch, p.poll_interval_secs, p.cancel_superseded, p.requires_approval, p.active, p.state_managed, p.created_at, coalesce(pm.role, om.role) as role
  from projects p
  join organizations o on o.id = p.organization_id
  left join project_members pm on pm.project_id = p.id and pm.user_id = ${userOf(who)}
  left join organization_members om on om.organization_id = p.organization_id and om.user_id = ${userOf(who)}`;

export async function findProject(sql: Queryable, who: Principal, org: string, name: string): Promise<ProjectRow | null> {
  const [row] = await sql<ProjectRow[]>`${projectColumns(sql, who)} where o.name = ${org} and p.name = ${name}`;
  return row ?? null;
}

export async function findProjectById(sql: Queryable, who: Principal, id: string): Promise<ProjectRow | null> {
  const [row] = await sql<ProjectRow[]>`${projectColumns(sql, who)} where p.id = ${id}`;
  return row ?? null;
}

export async function listProjectsOfOrganization(sql: Queryable, who: Principal, organizationId: string): Promise<ProjectRow[]> {
  return sql<ProjectRow[]>`${projectColumns(sql, who)} where p.organization_id = ${organizationId} order by p.name`;
}

/**
 * A single-segment {project}: the UUID, or a name. Several organizations may use one name; the
 * name then resolves when exactly one of them is visible to the caller, so the answer never
 * tells whether an invisible project of that name exists.
 */
export async function findProjectRef(sql: Queryable, who: Principal, ref: string): Promise<Found<ProjectRow> | null> {
  const rows = isUuid(ref)
    ? await sql<ProjectRow[]>`${projectColumns(sql, who)} where p.id = ${ref}`
    : await sql<ProjectRow[]>`${projectColumns(sql, who)} where p.name = ${ref}`;
  const visible = rows.map((row) => found(who, row, projectTarget(row))).filter((f) => f.access.visible);
  return visible.length === 1 ? visible[0]! : null;
}

export const findCache = (sql: Queryable, who: Principal, name: string): Promise<CacheRow | null> => cacheRowNamed(sql, userOf(who), name);

export const findCacheById = (sql: Queryable, who: Principal, id: string): Promise<CacheRow | null> => cacheRowById(sql, userOf(who), id);

function found<Row>(who: Principal, row: Row, target: AccessTarget): Found<Row> {
  return { row, target, access: accessOf(who, target) };
}

function demanded<Row>(who: Principal, row: Row, target: AccessTarget, permission: Permission): Found<Row> {
  return { row, target, access: demand(who, target, permission) };
}

export async function demandOrganization(sql: Queryable, who: Principal, name: string, permission: Permission): Promise<Found<OrganizationRow>> {
  const row = await findOrganization(sql, who, name);
  if (!row) throw notFound(`organization "${name}"`);
  return demanded(who, row, organizationTarget(row), permission);
}

export async function demandProject(sql: Queryable, who: Principal, org: string, name: string, permission: Permission): Promise<Found<ProjectRow>> {
  const row = await findProject(sql, who, org, name);
  if (!row) throw notFound(`project "${org}/${name}"`);
  return demanded(who, row, projectTarget(row), permission);
}

export async function demandProjectRef(sql: Queryable, who: Principal, ref: string, permission: Permission): Promise<Found<ProjectRow>> {
  const hit = await findProjectRef(sql, who, ref);
  if (!hit) throw notFound(`project "${ref}" (a name several organizations use must be given as the project's UUID)`);
  return demanded(who, hit.row, hit.target, permission);
}

export async function demandCache(sql: Queryable, who: Principal, name: string, permission: Permission): Promise<Found<CacheRow>> {
  const row = await findCache(sql, who, name);
  if (!row) throw notFound(`cache "${name}"`);
  return demanded(who, row, cacheTarget(row), permission);
}
