// Whether the signed-in account is a superuser (GET /user), asked once per session token: the nav
// shows Admin only to superusers, and the admin pages show a 403 page to everyone else.
import type { UserView } from '$protocol/api/accounts';
import { get } from '../api';
import { sessionToken } from '../session';

let asked: { token: string; answer: Promise<boolean> } | null = null;

export function isSuperuser(): Promise<boolean> {
  const token = sessionToken();
  if (!token) return Promise.resolve(false);
  if (asked?.token !== token) asked = { token, answer: get<UserView>('/user').then((u) => u.superuser === true) };
  return asked.answer;
}
