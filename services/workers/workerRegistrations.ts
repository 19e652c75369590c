// Worker peer tokens per project (POST /projects/{project}/workers): 48 random bytes, shown
// once as base64url, kept only as its SHA-256 (DESIGN.md, "The model"; peerTokenHash.ts). A worker presents
// the token in the /proto handshake; workerAuth.ts verifies it against these rows.
import { randomBytes } from 'node:crypto';
import { ApiError, type RegisterWorkerBody } from '../../protocol/index.js';
import { userIdOf } from '../access/index.js';
import type { AccessDeps } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { demandProjectRef, isUuid } from '../access/index.js';
import { hashPeerToken } from './peerTokenHash.js';

export interface WorkerRegistrationView {
  id: string;
  name: string;
  worker_id: string | null;
  /** a discoverable worker's /proto URL the server connects to; null: the worker connects */
  endpoint: string | null;
  created_by: string | null;
  created_at: Date;
}

export interface NewWorkerRegistration extends WorkerRegistrationView {
  /** the peer token, shown this once */
  token: string;
}

export const PEER_TOKEN_BYTES = 48;

/** A discoverable worker the server dials (http/proto/outboundWorkers.ts). */
export interface OutboundWorkerTarget {
  registrationId: string;
  projectId: string;
  endpoint: string;
  /** presented as Bearer; null: the worker accepts every server */
  serverToken: string | null;
}

export function workerRegistrationsService({ sql, events, secretBox }: AccessDeps) {
  const views = (projectId: string) => sql<WorkerRegistrationView[]>`
    select r.id, r.name, r.worker_id, r.endpoint, u.username as created_by, r.created_at
    from worker_registrations r left join users u on u.id = r.created_by
    where r.project_id = ${projectId} order by r.created_at`;

  return {
    async register(who: Principal, project: string, body: RegisterWorkerBody): Promise<NewWorkerRegistration> {
      const { row } = await demandProjectRef(sql, who, project, 'manageWorkers');
      const token = randomBytes(PEER_TOKEN_BYTES).toString('base64url');
      const hash = hashPeerToken(token);
      const created = await events.transaction(async (tx, emit) => {
        const [inserted] = await tx<{ id: string }[]>`
          insert into worker_registrations (project_id, worker_id, token_hash, name, created_by, endpoint, server_token)
          values (${row.id}, ${body.worker_id ?? null}, ${hash}, ${body.name ?? ''}, ${userIdOf(who)}, ${body.endpoint ?? null},
                  ${body.server_token === undefined ? null : secretBox.seal(Buffer.from(body.server_token))})
          returning id`;
        emit('project.worker.register', {
          project: `${row.organization}/${row.name}`, registration_id: inserted!.id, worker: body.worker_id ?? null, name: body.name ?? '',
        }, { organizationId: row.organization_id, projectId: row.id });
        return inserted;
      });
      const view = (await views(row.id)).find((r) => r.id === created!.id)!;
      return { ...view, token };
    },

    /** Every registration with an endpoint, its server token opened. */
    async outboundTargets(): Promise<OutboundWorkerTarget[]> {
      const rows = await sql<{ id: string; project_id: string; endpoint: string; server_token: Buffer | null }[]>`
        select id, project_id, endpoint, server_token from worker_registrations where endpoint is not null order by created_at`;
      return rows.map((r) => ({
        registrationId: r.id, projectId: r.project_id, endpoint: r.endpoint,
        serverToken: r.server_token === null ? null : secretBox.open(r.server_token).toString('utf8'),
      }));
    },

    async list(who: Principal, project: string): Promise<WorkerRegistrationView[]> {
      const { row } = await demandProjectRef(sql, who, project, 'manageWorkers');
      return views(row.id);
    },

    async remove(who: Principal, project: string, id: string): Promise<string> {
      const { row } = await demandProjectRef(sql, who, project, 'manageWorkers');
      const deleted = isUuid(id) ? await sql`delete from worker_registrations where id = ${id} and project_id = ${row.id} returning id` : [];
      if (deleted.length === 0) throw new ApiError('not_found', `no worker registration ${id} in project "${row.organization}/${row.name}"`);
      return 'Worker registration deleted';
    },
  };
}
export type WorkerRegistrationsService = ReturnType<typeof workerRegistrationsService>;
