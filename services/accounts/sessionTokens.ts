// Session tokens are JWTs (HS256): sub = user id, jti = the session row's id, iat, exp, iss "kiln".
// The signature makes forging one impossible; the session row (checked on every request) makes
// logging out and disabling an account take effect at once.
import { errors, jwtVerify, SignJWT } from 'jose';
import type { Config } from '../../config/index.js';
import { resolveInstanceKey, type InstanceKeySpec, type Sql } from '../../storage/index.js';

const ISSUER = 'kiln';
// Replacing secrets.jwtFile is allowed: it logs everyone out (docs/auth.md).
const JWT_KEY: InstanceKeySpec = { name: 'jwt.secret', option: 'secrets.jwtFile', fromText: (text) => new TextEncoder().encode(text), replaceable: true };

export interface SessionClaims {
  userId: string;
  sessionId: string;
}

export type VerifiedToken = { ok: true; claims: SessionClaims } | { ok: false; reason: 'expired' | 'invalid' };

export interface SessionTokenCodec {
  sign(claims: SessionClaims, issuedAt: Date, expiresAt: Date): Promise<string>;
  verify(token: string, now: Date): Promise<VerifiedToken>;
}

/** The signing secret: the text of secrets.jwtFile, or 32 random bytes generated once into <baseDir>/secrets/jwt.key. */
export async function loadJwtSecret(sql: Sql, config: Pick<Config, 'baseDir' | 'secrets.jwtFile'>): Promise<Uint8Array> {
  return new Uint8Array(await resolveInstanceKey(sql, { 'secrets.cryptFile': null, ...config }, JWT_KEY));
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function sessionTokenCodec(secret: Uint8Array): SessionTokenCodec {
  return {
    sign({ userId, sessionId }, issuedAt, expiresAt) {
      return new SignJWT({})
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer(ISSUER)
        .setSubject(userId)
        .setJti(sessionId)
        .setIssuedAt(seconds(issuedAt))
        .setExpirationTime(seconds(expiresAt))
        .sign(secret);
    },
    async verify(token, now) {
      try {
        const { payload } = await jwtVerify(token, secret, { algorithms: ['HS256'], issuer: ISSUER, currentDate: now, requiredClaims: ['sub', 'jti', 'exp'] });
        if (!UUID.test(payload.sub ?? '') || !UUID.test(payload.jti ?? '')) return { ok: false, reason: 'invalid' };
        return { ok: true, claims: { userId: payload.sub!, sessionId: payload.jti! } };
      } catch (e) {
        return { ok: false, reason: e instanceof errors.JWTExpired ? 'expired' : 'invalid' };
      }
    },
  };
}
