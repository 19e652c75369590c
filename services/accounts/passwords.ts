// argon2id with the library's defaults (m=64 MiB, t=3, p=4), stored as a PHC string. Every hash
// goes through the password gate, which keeps argon2 from filling libuv's thread pool.
import argon2 from 'argon2';
import { passwordGate } from './passwordGate.js';

export function hashPassword(password: string): Promise<string> {
  return passwordGate.run(() => argon2.hash(password, { type: argon2.argon2id }));
}

// A hash of nothing anyone knows, checked when the account does not exist or has no password, so
// that "no such user" takes as long as "wrong password" and the timing reveals no usernames.
let decoy: Promise<string> | undefined;

/** Whether `password` matches `hash`; with a null hash, burns the same time and answers false. */
export async function verifyPassword(hash: string | null, password: string): Promise<boolean> {
  if (hash === null) {
    decoy ??= hashPassword(`decoy-${Math.random()}`);
    const known = await decoy.catch((e: unknown) => {
      decoy = undefined; // refused (password_busy): the next caller tries again
      throw e;
    });
    await passwordGate.run(() => argon2.verify(known, password).catch(() => false));
    return false;
  }
  return passwordGate.run(async () => {
    try {
      return await argon2.verify(hash, password);
    } catch {
      return false; // a malformed stored hash is a refusal, not a 500
    }
  });
}
