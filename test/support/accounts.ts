// Accounts for HTTP tests: register and sign in through the real API.
import type { TestKiln } from './kiln.js';

let sequence = 0;

/**
 * A fresh client address for each call (127.0.0.1 is a trusted proxy by default, so kiln believes
 * X-Forwarded-For): the auth endpoints' per-address rate limits then never meet in a test.
 */
export function freshAddress(): Record<string, string> {
  sequence++;
  return { 'x-forwarded-for': `198.51.${(sequence >> 8) & 255}.${sequence & 255}` };
}

export interface TestAccount {
  username: string;
  email: string;
  password: string;
  id: string;
  token: string;
}

export async function registerUser(kiln: TestKiln, username: string, password = `pw-${username}-secret`): Promise<Omit<TestAccount, 'token'>> {
  const email = `${username}@example.test`;
  const res = await kiln.api<{ id: string }>('POST', '/auth/basic/register', { body: { username, name: username.toUpperCase(), email, password }, headers: freshAddress() });
  if (res.status !== 200) throw new Error(`register ${username}: ${res.status} ${JSON.stringify(res.message)}`);
  return { username, email, password, id: res.message.id };
}

export async function login(kiln: TestKiln, loginname: string, password: string): Promise<string> {
  const res = await kiln.api<string>('POST', '/auth/basic/login', { body: { loginname, password }, headers: freshAddress() });
  if (res.status !== 200) throw new Error(`login ${loginname}: ${res.status} ${JSON.stringify(res.message)}`);
  return res.message;
}

export async function signUp(kiln: TestKiln, username: string): Promise<TestAccount> {
  const user = await registerUser(kiln, username);
  return { ...user, token: await login(kiln, username, user.password) };
}
