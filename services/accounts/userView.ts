// A user as the API shows it to the account itself (GET /user, register, SCIM maps its own).

export interface UserRow {
  id: string;
  username: string;
  name: string;
  email: string | null;
  email_verified: boolean;
  password_hash: string | null;
  oidc_subject: string | null;
  superuser: boolean;
  disabled: boolean;
  settings: Record<string, unknown>;
  state_managed: boolean;
  scim_external_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface UserView {
  id: string;
  username: string;
  name: string;
  email: string | null;
  email_verified: boolean;
  superuser: boolean;
  /** whether the account can sign in with a password (OIDC-only accounts cannot) */
  has_password: boolean;
  oidc_linked: boolean;
  state_managed: boolean;
  created_at: string;
}

export function toUserView(row: UserRow): UserView {
  return {
    id: row.id,
    username: row.username,
    name: row.name,
    email: row.email,
    email_verified: row.email_verified,
    superuser: row.superuser,
    has_password: row.password_hash !== null,
    oidc_linked: row.oidc_subject !== null,
    state_managed: row.state_managed,
    created_at: row.created_at.toISOString(),
  };
}
