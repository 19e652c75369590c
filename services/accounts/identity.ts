// The identity services (accounts, sessions, API keys, e-mail), opened together.
import { accountsService, type Accounts } from './accounts.js';
import { adminAccountsService, type AdminAccounts } from './adminAccounts.js';
import { apiKeysService, type ApiKeys } from './apiKeys.js';
import { emailVerificationService, type EmailVerification } from './emailVerification.js';
import type { IdentityDeps } from './identityDeps.js';
import { createMailer } from './mailer.js';
import { oidcService, type Oidc } from './oidc.js';
import { projectResolver, type ResolvePinnedProject } from '../projects/index.js';
import { scimService, type Scim } from './scim.js';
import { openSessions, type Sessions } from './sessions.js';
import { userProfileService, type UserProfile } from './userProfile.js';

/** Everything about who someone is: accounts, sessions, API keys, e-mail verification, OIDC and SCIM. */
export interface IdentityServices {
  sessions: Sessions;
  accounts: Accounts;
  profile: UserProfile;
  apiKeys: ApiKeys;
  emailVerification: EmailVerification;
  oidc: Oidc;
  scim: Scim;
  /** every account and session, for superusers */
  admin: AdminAccounts;
  close(): void;
}

export interface IdentityOptions {
  /** how an API key's `project` is resolved; by default a direct query (pinnedProject.ts) */
  resolveProject?: ResolvePinnedProject;
}

/** Async because the session-signing secret may have to be generated and stored first. */
export async function openIdentityServices(deps: IdentityDeps, opts: IdentityOptions = {}): Promise<IdentityServices> {
  const sessions = await openSessions(deps);
  const mailer = createMailer(deps.config, deps.log);
  const emailVerification = emailVerificationService(deps, mailer);
  return {
    sessions,
    accounts: accountsService(deps, sessions, emailVerification),
    profile: userProfileService(deps, sessions, emailVerification),
    apiKeys: apiKeysService(deps, opts.resolveProject ?? projectResolver(deps.sql)),
    emailVerification,
    oidc: oidcService(deps, sessions),
    scim: scimService(deps, sessions),
    admin: adminAccountsService(deps),
    close: () => mailer.close(),
  };
}
