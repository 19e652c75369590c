// The authorization matrix, continued for the binary cache paths: see authorizationMatrix.ts.
import t from 'tap';
import { permissionNames } from '../../protocol/index.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { addCacheMember, createTestCache } from '../support/caches.js';
import { buildFixturePaths } from '../support/nixStore.js';
import { localNar, uploadChunked } from '../support/narUploads.js';

async function createKey(kiln: TestKiln, user: TestAccount, body: Record<string, unknown>): Promise<string> {
  const res = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: user.token, body });
  if (res.status !== 200) throw new Error(`creating key ${JSON.stringify(body)} for ${user.username}: ${res.status} ${JSON.stringify(res.message)}`);
  return res.message.secret;
}

// The binary cache paths (issue 15): HTTP Basic with any user name and a token as the password,
// checked per cache (http/cache/cacheGate.ts). A key acts there as on the REST API: reading a
// private cache needs viewCache among the key's permissions, Nix-native PUTs need writeStore, a key
// pinned to another cache sees nothing, and a key pinned to a project reaches its owner's caches
// (docs/permissions.md). Each cell is asked twice: the second answer comes from what the process
// remembers (and for anonymous narinfo GETs from the lane), which must not decide differently.
type CacheCredential =
  | 'none' | 'ownerSession' | 'keyAll' | 'keyViewCache' | 'keyWithoutViewCache' | 'keyViewProjectOnly'
  | 'keyPinnedToProject' | 'keyPinnedToProjectViewProjectOnly' | 'keyPinnedToThisCache' | 'keyPinnedToOtherCache'
  | 'viewerKeyAll' | 'strangerSession' | 'strangerKeyAll';
/** a status, or 404 told apart: `hidden` is "no cache" (not revealed), `absent` the cache has no such thing */
type Outcome = 200 | 400 | 401 | 403 | 'hidden' | 'absent';
type Access = 'read' | 'write' | 'readPublic';

const cacheOutcomes: Record<CacheCredential, Record<Access, 'ok' | Outcome>> = {
  none: { read: 401, write: 401, readPublic: 'ok' },
  ownerSession: { read: 'ok', write: 'ok', readPublic: 'ok' },
  keyAll: { read: 'ok', write: 'ok', readPublic: 'ok' },
  keyViewCache: { read: 'ok', write: 403, readPublic: 'ok' },
  keyWithoutViewCache: { read: 403, write: 'ok', readPublic: 'ok' },
  keyViewProjectOnly: { read: 403, write: 403, readPublic: 'ok' },
  keyPinnedToProject: { read: 'ok', write: 'ok', readPublic: 'ok' },
  keyPinnedToProjectViewProjectOnly: { read: 403, write: 403, readPublic: 'ok' },
  keyPinnedToThisCache: { read: 'ok', write: 'ok', readPublic: 'hidden' },
  keyPinnedToOtherCache: { read: 'hidden', write: 'hidden', readPublic: 'hidden' },
  viewerKeyAll: { read: 'ok', write: 403, readPublic: 'ok' },
  strangerSession: { read: 'hidden', write: 'hidden', readPublic: 'ok' },
  strangerKeyAll: { read: 'hidden', write: 'hidden', readPublic: 'ok' },
};

interface CacheEndpoint {
  method: 'GET' | 'HEAD' | 'PUT';
  /** under /cache/{cache}/ */
  path: (nar: { hash: string; fileHash: string }) => string;
  access: Access;
  /** what an allowed caller gets */
  ok: Outcome;
  body?: string;
}

const cacheEndpoints: CacheEndpoint[] = [
  { method: 'GET', path: () => 'nix-cache-info', access: 'read', ok: 200 },
  { method: 'GET', path: () => 'pkg-cache-info', access: 'read', ok: 200 },
  { method: 'GET', path: (n) => `${n.hash}.narinfo`, access: 'read', ok: 200 },
  { method: 'HEAD', path: (n) => `${n.hash}.narinfo`, access: 'read', ok: 200 },
  { method: 'GET', path: () => `${'0'.repeat(32)}.narinfo`, access: 'read', ok: 'absent' },
  { method: 'GET', path: (n) => `nar/${n.fileHash}.nar.zst`, access: 'read', ok: 200 },
  { method: 'HEAD', path: (n) => `nar/${n.fileHash}.nar.zst`, access: 'read', ok: 200 },
  { method: 'GET', path: (n) => `${n.hash}.ls`, access: 'read', ok: 200 },
  { method: 'GET', path: (n) => `ls/${n.hash}`, access: 'read', ok: 200 },
  { method: 'GET', path: (n) => `serve/${n.hash}/bin/hello`, access: 'read', ok: 200 },
  { method: 'GET', path: () => `log/${'0'.repeat(32)}-matrix.drv`, access: 'read', ok: 'absent' },
  { method: 'GET', path: () => 'debuginfo/0123456789abcdef', access: 'read', ok: 'absent' },
  // Nix-native uploads (`nix copy --to`): the gate answers before the body is looked at
  { method: 'PUT', path: () => 'nix-cache-info', access: 'write', ok: 200, body: 'StoreDir: /nix/store\n' },
  { method: 'PUT', path: (n) => `${n.hash}.ls`, access: 'write', ok: 200, body: '{}' },
  { method: 'PUT', path: (n) => `${n.hash}.narinfo`, access: 'write', ok: 400, body: 'not a narinfo\n' },
  // a public cache: anyone may read it, with or without credentials, except a key pinned elsewhere
  { method: 'GET', path: () => 'nix-cache-info', access: 'readPublic', ok: 200 },
  { method: 'GET', path: (n) => `${n.hash}.narinfo`, access: 'readPublic', ok: 200 },
];

t.test('authorization matrix: binary cache paths', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root'); // the first account is the superuser; the others are not
  const owner = await signUp(kiln, 'owner');
  const viewer = await signUp(kiln, 'viewer');
  const stranger = await signUp(kiln, 'stranger');
  const org = await kiln.api<{ id: string }>('PUT', '/orgs', { token: owner.token, body: { name: 'acme' } });
  await kiln.sql`insert into projects (organization_id, name, repository) values (${org.message.id}, 'web', 'file:///nonexistent')`;
  const vault = await createTestCache(kiln.sql, 'vault', { ownerId: owner.id });
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  await createTestCache(kiln.sql, 'other', { ownerId: owner.id });
  await addCacheMember(kiln.sql, vault.id, viewer.id, 'View');
  const tree = localNar(buildFixturePaths().tree);
  for (const cache of ['vault', 'open']) {
    const uploaded = await uploadChunked(kiln, owner.token, cache, tree);
    if (uploaded.status !== 200) throw new Error(`uploading to ${cache}: ${JSON.stringify(uploaded.body)}`);
  }
  const [stored] = await kiln.sql<{ file_hash: string }[]>`select file_hash from cached_paths where hash_part = ${tree.hash}`;
  const nar = { hash: tree.hash, fileHash: stored!.file_hash };

  const all = [...permissionNames];
  const withoutViewCache = all.filter((p) => p !== 'viewCache');
  const secrets: Record<CacheCredential, string | undefined> = {
    none: undefined,
    ownerSession: owner.token,
    keyAll: await createKey(kiln, owner, { name: 'all', permissions: all }),
    keyViewCache: await createKey(kiln, owner, { name: 'view-cache', permissions: ['viewCache'] }),
    keyWithoutViewCache: await createKey(kiln, owner, { name: 'without-view-cache', permissions: withoutViewCache }),
    keyViewProjectOnly: await createKey(kiln, owner, { name: 'view-project', permissions: ['viewProject'] }),
    keyPinnedToProject: await createKey(kiln, owner, { name: 'pinned-project', permissions: all, project: 'acme/web' }),
    keyPinnedToProjectViewProjectOnly: await createKey(kiln, owner, { name: 'pinned-project-view', permissions: ['viewProject'], project: 'acme/web' }),
    keyPinnedToThisCache: await createKey(kiln, owner, { name: 'pinned-vault', permissions: all, cache: 'vault' }),
    keyPinnedToOtherCache: await createKey(kiln, owner, { name: 'pinned-other', permissions: all, cache: 'other' }),
    viewerKeyAll: await createKey(kiln, viewer, { name: 'all', permissions: all }),
    strangerSession: stranger.token,
    strangerKeyAll: await createKey(kiln, stranger, { name: 'all', permissions: all }),
  };

  const outcomeOf = async (res: Response, cache: string): Promise<Outcome | number> => {
    if (res.status !== 404) return res.status;
    // HEAD has no body: a HEAD 404 is told apart by asking the same with GET
    const text = await res.text();
    return text.includes(`"no cache \\"${cache}\\""`) ? 'hidden' : 'absent';
  };

  for (const e of cacheEndpoints) {
    const cache = e.access === 'readPublic' ? 'open' : 'vault';
    const path = `/cache/${cache}/${e.path(nar)}`;
    t.test(`${e.method} ${path.replace(nar.hash, '{hash}').replace(nar.fileHash, '{filehash}')}${e.access === 'readPublic' ? ' (public)' : ''}`, async (t) => {
      for (const credential of Object.keys(cacheOutcomes) as CacheCredential[]) {
        const expected = cacheOutcomes[credential][e.access];
        const want = expected === 'ok' ? e.ok : expected;
        const secret = secrets[credential];
        for (const round of ['first', 'remembered']) {
          const headers: Record<string, string> = secret ? { authorization: `Basic ${Buffer.from(`nix:${secret}`).toString('base64')}` } : {};
          const method = e.method === 'HEAD' ? 'GET' : e.method; // the same decision; GET has a body to tell 404s apart
          const res = await fetch(`${kiln.url}${path}`, { method, headers, redirect: 'manual', ...(e.body === undefined ? {} : { body: e.body }) });
          const got = await outcomeOf(res, cache);
          if (e.method === 'HEAD') {
            const head = await fetch(`${kiln.url}${path}`, { method: 'HEAD', headers });
            t.equal(head.status, res.status, `${credential} (${round}): HEAD answers as GET`);
          }
          t.equal(got, want, `${credential} (${round}): ${want}`);
          if (want === 401) t.equal(res.headers.get('www-authenticate'), 'Basic realm="kiln"', `${credential}: a Basic challenge`);
        }
      }
    });
  }
});
