// Who is asking. Built by http's authenticator, passed to every service call.
export type Principal =
  | { kind: 'anonymous' }
  | { kind: 'user'; userId: string; username: string; superuser: boolean; via: 'session' | 'key' };

export const anonymous: Principal = { kind: 'anonymous' };

export const isSuperuser = (p: Principal): boolean => p.kind === 'user' && p.superuser;
