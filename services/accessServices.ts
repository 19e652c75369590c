// The access services built together from one AccessDeps: organizations, projects, caches' subscriptions,
// members and invitations are separate domains that share these dependencies.
import { invitationsService, membersService, type AccessDeps } from './access/index.js';
import { organizationMembersService } from './organizations/index.js';
import { organizationSshKeyService } from './organizations/index.js';
import { organizationsService } from './organizations/index.js';
import { projectsService } from './projects/index.js';
import { serversService } from './organizations/index.js';
import { subscriptionsService } from './caches/index.js';
import { tasksService } from './projects/index.js';
import { workerRegistrationsService } from './workers/index.js';

/** Organizations, projects, tasks, servers, members, invitations, subscriptions and worker registrations, built once at start. */
export function createAccessServices(deps: AccessDeps) {
  return {
    organizations: organizationsService(deps),
    organizationMembers: organizationMembersService(deps),
    organizationSshKey: organizationSshKeyService(deps),
    projects: projectsService(deps),
    tasks: tasksService(deps),
    servers: serversService(deps),
    members: membersService(deps),
    invitations: invitationsService(deps),
    subscriptions: subscriptionsService(deps),
    workerRegistrations: workerRegistrationsService(deps),
  };
}
export type AccessServices = ReturnType<typeof createAccessServices>;
