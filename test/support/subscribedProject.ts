// The fixture the scheduler tests share: ada's project acme/app (a repository that does not exist:
// these tests drive evaluations and builds through a protocol-level worker) subscribed to her cache main.
import { signUp } from './accounts.js';
import { createTestCache, type TestCache } from './caches.js';
import type { TestKiln } from './kiln.js';

export interface SubscribedProject {
  token: string;
  projectId: string;
  cache: TestCache;
}

/** `repository`: a real one for tests with a real worker; `publicCache`: main is public. */
export async function subscribedProject(kiln: TestKiln, opts: { repository?: string; publicCache?: boolean } = {}): Promise<SubscribedProject> {
  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  const made = await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: opts.repository ?? 'file:///nonexistent', wildcard: 'packages.x86_64-linux.*' } });
  if (made.status !== 200) throw new Error(`PUT /projects/acme: ${String(made.message)}`);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', opts.publicCache ? { public: true } : {});
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;
  return { token, projectId: project!.id, cache };
}
