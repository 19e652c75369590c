// Invitations to projects and caches (spec, "States and transitions"):
//   none → pending        invite by username; expires after 7 days; grants nothing while pending
//   pending → pending     invite again while one is open: 409 invitation_exists
//   pending → member      accept, signed in (session) as the invited account, before expiry
//   pending → deleted     decline (invited account) or revoke (manageMembers / manageCacheMembers)
//   pending → discarded   accept after expiry: 410 invitation_expired
// A superuser who holds the member-management permission adds the member directly.
import { createHash, randomBytes } from 'node:crypto';
import type { Fragment } from 'postgres';
import { ApiError, INVITATION_LIFETIME_MS, type InviteBody, type Permission } from '../../protocol/index.js';
import { accessOf, demandSession, forbidden, notFound, userIdOf, type AccessTarget } from './access.js';
import { cacheNameOf } from '../../storage/index.js';
import type { AccessDeps } from './accessDeps.js';
import { findUserId, insertMember, roleOf } from './memberships.js';
import { emitInvitationEvent, emitMemberEvent, type MemberPlace } from './memberEvents.js';
import { isSuperuser, type Principal } from './principal.js';
import type { Queryable } from '../../storage/index.js';
import { demandNotStateManaged } from './stateManaged.js';
import { cacheTarget, demandCache, demandProjectRef, findCacheById, findProjectById, isUuid, projectTarget } from './targets.js';

export interface InvitationView {
  id: string;
  /** `org/project`, or null for a cache invitation */
  project: string | null;
  cache: string | null;
  user: string;
  role: string;
  inviter: string | null;
  created_at: Date;
  expires_at: Date;
}

interface InvitationRow {
  id: string;
  project_id: string | null;
  cache_id: string | null;
  user_id: string;
  role: 'Admin' | 'Write' | 'View';
  expires_at: Date;
}

/** Where an invitation leads: a project (manageMembers) or a cache (manageCacheMembers). */
interface Destination {
  scope: 'project' | 'cache';
  column: 'project_id' | 'cache_id';
  target: AccessTarget;
  stateManaged: boolean;
  /** how its events name it */
  place: Exclude<MemberPlace, { scope: 'organization' }>;
}

const memberPermission = { project: 'manageMembers', cache: 'manageCacheMembers' } as const satisfies Record<string, Permission>;
const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

export function invitationsService({ sql, clock, events }: AccessDeps) {
  const views = (where: Fragment) => sql<InvitationView[]>`
    select i.id, case when p.id is null then null else o.name || '/' || p.name end as project, c.name as cache,
           u.username as user, i.role, inv.username as inviter, i.created_at, i.expires_at
    from invitations i
    join users u on u.id = i.user_id
    left join users inv on inv.id = i.inviter_id
    left join projects p on p.id = i.project_id
    left join organizations o on o.id = p.organization_id
    left join caches c on c.id = i.cache_id
    ${where} order by i.created_at`;

  async function invite(who: Principal, to: Destination, body: InviteBody): Promise<string> {
    demandNotStateManaged({ state_managed: to.stateManaged }, to.target.label);
    const userId = await findUserId(sql, body.user);
    if (await roleOf(sql, to.scope, to.target.id, userId)) {
      throw new ApiError('already_member', `${body.user} is already a member of ${to.target.label}`);
    }
    if (isSuperuser(who)) {
      await events.transaction(async (tx, emit) => {
        await insertMember(tx, to.scope, to.target.id, userId, body.role, to.target.label);
        emitMemberEvent(emit, to.place, 'create', body.user, body.role);
      });
      return `${body.user} added to ${to.target.label} as ${body.role}`;
    }
    const now = clock.now();
    try {
      await events.transaction(async (tx, emit) => {
        // An expired invitation no longer counts as open; it makes room for the new one.
        await tx`delete from invitations where user_id = ${userId} and ${tx(to.column)} = ${to.target.id} and expires_at <= ${now}`;
        await tx`
          insert into invitations (${tx(to.column)}, user_id, role, inviter_id, token_hash, created_at, expires_at)
          values (${to.target.id}, ${userId}, ${body.role}, ${userIdOf(who)},
                  ${createHash('sha256').update(randomBytes(32)).digest('hex')}, ${now}, ${new Date(now.getTime() + INVITATION_LIFETIME_MS)})`;
        emitInvitationEvent(emit, to.place, body.user, body.role, who.kind === 'user' ? who.username : null);
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ApiError('invitation_exists', `${body.user} already has an open invitation to ${to.target.label}`);
      throw e;
    }
    return `Invitation sent to ${body.user}`;
  }

  async function projectDestination(who: Principal, project: string, permission: Permission): Promise<Destination> {
    const { row, target } = await demandProjectRef(sql, who, project, permission);
    const place = { scope: 'project', id: row.id, organizationId: row.organization_id, label: `${row.organization}/${row.name}` } as const;
    return { scope: 'project', column: 'project_id', target, stateManaged: row.state_managed, place };
  }
  async function cacheDestination(who: Principal, cache: string, permission: Permission): Promise<Destination> {
    const { row, target } = await demandCache(sql, who, cache, permission);
    return { scope: 'cache', column: 'cache_id', target, stateManaged: row.state_managed, place: { scope: 'cache', id: row.id, name: row.name } };
  }

  async function memberPlace(tx: Queryable, scope: 'project' | 'cache', id: string): Promise<MemberPlace> {
    if (scope === 'cache') {
      return { scope, id, name: (await cacheNameOf(tx, id))! };
    }
    const [project] = await tx<{ organization_id: string; label: string }[]>`
      select p.organization_id, o.name || '/' || p.name as label from projects p join organizations o on o.id = p.organization_id where p.id = ${id}`;
    return { scope, id, organizationId: project!.organization_id, label: project!.label };
  }

  async function invitation(id: string): Promise<InvitationRow> {
    const [row] = isUuid(id)
      ? await sql<InvitationRow[]>`select id, project_id, cache_id, user_id, role, expires_at from invitations where id = ${id}`
      : [];
    if (!row) throw new ApiError('not_found', `no invitation ${id}`);
    return row;
  }

  /** The invitation, when it is the caller's own; 403 not_invited otherwise. */
  async function ownInvitation(userId: string, id: string): Promise<InvitationRow> {
    const row = await invitation(id);
    if (row.user_id !== userId) throw new ApiError('not_invited', `invitation ${id} is for another account`);
    return row;
  }

  return {
    async inviteToProject(who: Principal, project: string, body: InviteBody): Promise<string> {
      return invite(who, await projectDestination(who, project, 'manageMembers'), body);
    },
    async inviteToCache(who: Principal, cache: string, body: InviteBody): Promise<string> {
      return invite(who, await cacheDestination(who, cache, 'manageCacheMembers'), body);
    },

    /** "My invites": the caller's open invitations. */
    async listMine(who: Principal): Promise<InvitationView[]> {
      const userId = userIdOf(who);
      return views(sql`where i.user_id = ${userId} and i.expires_at > ${clock.now()}`);
    },
    async listProject(who: Principal, project: string): Promise<InvitationView[]> {
      const { target } = await projectDestination(who, project, 'manageMembers');
      return views(sql`where i.project_id = ${target.id} and i.expires_at > ${clock.now()}`);
    },
    async listCache(who: Principal, cache: string): Promise<InvitationView[]> {
      const { target } = await cacheDestination(who, cache, 'manageCacheMembers');
      return views(sql`where i.cache_id = ${target.id} and i.expires_at > ${clock.now()}`);
    },

    /** Needs a session of the invited account: a narrow API key must not widen its owner's access. */
    async accept(who: Principal, id: string): Promise<string> {
      const userId = demandSession(who, 'accepting an invitation');
      const row = await ownInvitation(userId, id);
      if (row.expires_at.getTime() <= clock.now().getTime()) {
        await sql`delete from invitations where id = ${row.id}`;
        throw new ApiError('invitation_expired', `invitation ${id} expired on ${row.expires_at.toISOString()}; ask for a new one`);
      }
      const scope = row.project_id ? 'project' : 'cache';
      const targetId = (row.project_id ?? row.cache_id)!;
      await events.transaction(async (tx, emit) => {
        await tx`delete from invitations where id = ${row.id}`;
        const joined = await tx`
          insert into ${tx(scope === 'project' ? 'project_members' : 'cache_members')} (${tx(scope === 'project' ? 'project_id' : 'cache_id')}, user_id, role)
          values (${targetId}, ${userId}, ${row.role})
          on conflict do nothing returning user_id`;
        if (joined.length > 0 && who.kind === 'user') emitMemberEvent(emit, await memberPlace(tx, scope, targetId), 'create', who.username, row.role);
      });
      return `Invitation accepted: you are ${row.role} on the ${scope}`;
    },

    async decline(who: Principal, id: string): Promise<string> {
      const row = await ownInvitation(userIdOf(who), id);
      await sql`delete from invitations where id = ${row.id}`;
      return 'Invitation declined';
    },

    /** By whoever manages the members of the invitation's project or cache; others learn nothing of it. */
    async revoke(who: Principal, id: string): Promise<string> {
      const row = await invitation(id);
      const project = row.project_id ? await findProjectById(sql, who, row.project_id) : null;
      const cache = row.cache_id ? await findCacheById(sql, who, row.cache_id) : null;
      const target = project ? projectTarget(project) : cache ? cacheTarget(cache) : null;
      const access = target ? accessOf(who, target) : null;
      if (!target || !access?.visible) throw notFound(`invitation ${id}`);
      const permission = memberPermission[target.scope === 'project' ? 'project' : 'cache'];
      if (!access.permissions.has(permission)) throw forbidden(permission, target.label);
      await sql`delete from invitations where id = ${row.id}`;
      return 'Invitation revoked';
    },
  };
}
export type InvitationsService = ReturnType<typeof invitationsService>;
