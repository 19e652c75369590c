// Users' SSH public keys (GET/POST/DELETE /user/ssh-keys, a kiln extension): what kiln's SSH
// server logs a user in by. Adding and deleting take a session, as API keys do: a leaked API key
// must not be able to plant a login that outlives it.
import { createHash } from 'node:crypto';
import type { Sql } from 'postgres';
import { ApiError, type AddSshKeyBody, type UserSshKeyView } from '../../protocol/index.js';
import { requireSession, requireUser, type Principal, type SessionUser } from '../access/index.js';

interface KeyRow {
  id: string;
  name: string;
  key_type: string;
  key_blob: string;
  fingerprint: string;
  last_used_at: Date | null;
  created_at: Date;
}

const toView = (r: KeyRow): UserSshKeyView => ({
  id: r.id,
  name: r.name,
  type: r.key_type,
  fingerprint: r.fingerprint,
  public_key: `${r.key_type} ${r.key_blob}`,
  last_used_at: r.last_used_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
});

export const sshFingerprint = (blob: Buffer): string => `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;

/** The type and wire blob of an OpenSSH public key line; a 400 naming the problem otherwise. */
async function parsePublicKey(line: string): Promise<{ type: string; blob: Buffer }> {
  // ssh2 is loaded at the first key, not by every process (docs/operations.md, "Memory at rest")
  const { utils } = (await import('ssh2')).default;
  const parsed = utils.parseKey(line.trim());
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (key === undefined || key instanceof Error) {
    throw new ApiError('invalid_body', `public_key: not an OpenSSH public key line (\`ssh-ed25519 AAAA… comment\`): ${key instanceof Error ? key.message : 'empty'}`);
  }
  if (key.isPrivateKey()) throw new ApiError('invalid_body', 'public_key: this is a private key; send the .pub file\'s line');
  return { type: key.type, blob: key.getPublicSSH() };
}

/** The user a login key belongs to, as an SSH session acts for them. */
export interface SshKeyOwner {
  keyId: string;
  user: SessionUser;
}

export type UserSshKeys = ReturnType<typeof userSshKeysService>;

export function userSshKeysService({ sql }: { sql: Sql }) {
  const rows = (userId: string) => sql<KeyRow[]>`
    select id, name, key_type, key_blob, fingerprint, last_used_at, created_at from user_ssh_keys
    where user_id = ${userId} order by created_at, name`;

  return {
    async list(who: Principal): Promise<UserSshKeyView[]> {
      return (await rows(requireUser(who).userId)).map(toView);
    },

    async add(who: Principal, body: AddSshKeyBody): Promise<UserSshKeyView> {
      const user = requireSession(who, 'adding an SSH key');
      const { type, blob } = await parsePublicKey(body.public_key);
      try {
        const [row] = await sql<KeyRow[]>`
          insert into user_ssh_keys (user_id, name, key_type, key_blob, fingerprint)
          values (${user.userId}, ${body.name}, ${type}, ${blob.toString('base64')}, ${sshFingerprint(blob)})
          returning id, name, key_type, key_blob, fingerprint, last_used_at, created_at`;
        return toView(row!);
      } catch (e) {
        if ((e as { code?: string }).code === '23505') {
          throw new ApiError('ssh_key_exists', `you already have an SSH key named "${body.name}", or this public key is registered already`);
        }
        throw e;
      }
    },

    async delete(who: Principal, name: string): Promise<string> {
      const user = requireSession(who, 'deleting an SSH key');
      const deleted = await sql`delete from user_ssh_keys where user_id = ${user.userId} and name = ${name} returning id`;
      if (deleted.length === 0) throw new ApiError('ssh_key_not_found', `you have no SSH key named "${name}"`);
      return `SSH key "${name}" deleted`;
    },

    /** Who logs in with this key blob: an enabled user, or null. Asking marks nothing: the key may not be proven yet. */
    async ownerOf(blob: Buffer): Promise<SshKeyOwner | null> {
      const [row] = await sql<{ id: string; user_id: string; username: string; superuser: boolean }[]>`
        select k.id, u.id as user_id, u.username::text as username, u.superuser
        from user_ssh_keys k join users u on u.id = k.user_id
        where k.key_blob = ${blob.toString('base64')} and not u.disabled`;
      if (!row) return null;
      // An SSH login acts as the user does in a session; its id names the key, for the access memo.
      return { keyId: row.id, user: { kind: 'user', via: 'session', sessionId: `ssh-key:${row.id}`, userId: row.user_id, username: row.username, superuser: row.superuser } };
    },

    /**
     * Records a login by the key: only after its signature verified. An unsigned publickey query
     * proves nothing (anyone may hold a public key), so it must not look like a use.
     */
    async markUsed(keyId: string): Promise<void> {
      await sql`update user_ssh_keys set last_used_at = now() where id = ${keyId}`;
    },
  };
}
