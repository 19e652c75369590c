// The access services built together from one AccessDeps.
import type { AccessDeps } from './accessDeps.js';
import { invitationsService } from './invitations.js';
import { membersService } from './members.js';
import { organizationMembersService } from './organizationMembers.js';
import { organizationSshKeyService } from './organizationSshKey.js';
import { organizationsService } from './organizations.js';
import { projectsService } from './projects.js';
import { serversService } from './servers.js';
import { subscriptionsService } from './subscriptions.js';
import { tasksService } from './tasks.js';
import { workerRegistrationsService } from './workerRegistrations.js';

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
