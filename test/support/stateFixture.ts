// A state file with its secret files in a temporary directory.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const KEY_SECRET = 'SVC0123456789abcdefghijklmnopqrstuvwxyzABCDEFG';

export function writeStateFile(state: unknown, dir = mkdtempSync(join(tmpdir(), 'kiln-state-'))): { dir: string; file: string } {
  writeFileSync(join(dir, 'ada.password'), 'correct horse battery\n');
  writeFileSync(join(dir, 'ci.key'), `${KEY_SECRET}\n`);
  const file = join(dir, 'state.json');
  writeFileSync(file, JSON.stringify(state, null, 2));
  return { dir, file };
}

/** A state file that uses every section; secret files are named relative to `dir`. */
export function fullState(dir: string) {
  return {
    users: [
      { username: 'ada', name: 'Ada', email: 'ada@example.test', password_file: join(dir, 'ada.password'), superuser: true },
      { username: 'ci' },
    ],
    organizations: [{ name: 'acme', display_name: 'Acme' }],
    projects: [{ organization: 'acme', name: 'web', repository: 'https://git.example/acme/web.git', default_branch: 'main' }],
    caches: [{ name: 'main', public: true, priority: 30, owner: 'ada' }, { name: 'private' }],
    memberships: [
      { user: 'ada', role: 'Admin', organization: 'acme' },
      { user: 'ci', role: 'Write', project: 'acme/web' },
      { user: 'ci', role: 'Write', cache: 'private' },
    ],
    subscriptions: [{ project: 'acme/web', cache: 'main', mode: 0 }, { organization: 'acme', cache: 'private', mode: 2 }],
    api_keys: [{
      user: 'ci', name: 'push', permissions: ['writeStore', 'viewProject'], secret_file: join(dir, 'ci.key'),
      project: 'acme/web', expires_in_days: 30, allowed_ips: ['10.0.0.1/8'],
    }],
  };
}
