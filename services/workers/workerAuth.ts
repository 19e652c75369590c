// The two lookups of the /proto handshake (docs/proto.md, "Handshake"): which projects registered
// this worker (rows made for its id, and rows made without one, which any worker may present),
// and which presented tokens match those rows' hashes. Tokens are kept as SHA-256
// (peerTokenHash.ts), so a handshake costs one hash per token; a row still holding an argon2id
// hash from before is verified the slow way once and then rewritten as SHA-256 (only if the row
// still holds that hash), so a fleet reconnecting after an upgrade pays argon2 once per token ever.
// The rows are read on every handshake, so a deleted registration stops matching at once.
import type { Sql } from 'postgres';
import { MAX_CHALLENGE_PROJECTS, type Hello, type ProjectToken } from '../../protocol/index.js';
import { hashPeerToken, isLegacyPeerTokenHash, peerTokenMatches } from './peerTokenHash.js';
import type { BuildServerPasses } from './buildServerPasses.js';

export interface WorkerAuth {
  /** project UUIDs to challenge the worker with */
  projectsFor(hello: Hello): Promise<string[]>;
  /** what open mode grants a worker at this address; null refuses open mode */
  openModeProjects(hello: Hello, loopback: boolean): Promise<string[] | null>;
  /** the projects whose token verified */
  verify(hello: Hello, tokens: readonly ProjectToken[]): Promise<string[]>;
}

/** `passes`: the workers kiln runs for build servers (buildServerPasses.ts), whose ids answer only to their pass. */
export function createWorkerAuth(sql: Sql, opts: { localWorker: boolean; passes?: BuildServerPasses }): WorkerAuth {
  const verifies = async (row: { id: string; token_hash: string }, token: string): Promise<boolean> => {
    if (!(await peerTokenMatches(row.token_hash, token))) return false;
    if (isLegacyPeerTokenHash(row.token_hash)) {
      await sql`update worker_registrations set token_hash = ${hashPeerToken(token)} where id = ${row.id} and token_hash = ${row.token_hash}`;
    }
    return true;
  };
  return {
    async projectsFor(hello) {
      const passed = opts.passes?.projectsFor(hello.workerId);
      if (passed) return [...passed];
      const rows = await sql<{ project_id: string }[]>`
        select distinct r.project_id from worker_registrations r join projects p on p.id = r.project_id
        where p.active and (r.worker_id = ${hello.workerId} or r.worker_id is null)
        order by r.project_id limit ${MAX_CHALLENGE_PROJECTS}`;
      return rows.map((r) => r.project_id);
    },

    // Open mode is for the local worker only (docs/builds.md): a worker without a peers file on
    // the loopback interface of a server that runs one, serving every active project.
    async openModeProjects(hello, loopback) {
      // a build server's worker id answers only to its pass
      if (!opts.localWorker || !loopback || opts.passes?.projectsFor(hello.workerId)) return null;
      const rows = await sql<{ id: string }[]>`select id from projects where active order by created_at limit ${MAX_CHALLENGE_PROJECTS}`;
      return rows.map((r) => r.id);
    },

    async verify(hello, tokens) {
      const passed = opts.passes?.verify(hello.workerId, tokens);
      if (passed) return [...passed];
      const projects = [...new Set(tokens.map((t) => t.project.toLowerCase()))];
      if (projects.length === 0) return [];
      const rows = await sql<{ id: string; project_id: string; token_hash: string }[]>`
        select id, project_id, token_hash from worker_registrations
        where project_id = any(${projects}::uuid[]) and (worker_id = ${hello.workerId} or worker_id is null)`;
      const verified = new Set<string>();
      for (const token of tokens) {
        const project = token.project.toLowerCase();
        if (verified.has(project)) continue;
        for (const row of rows.filter((r) => r.project_id === project)) {
          if (await verifies(row, token.token)) {
            verified.add(project);
            break;
          }
        }
      }
      return [...verified];
    },
  };
}
