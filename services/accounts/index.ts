// The public face of services/accounts/: what other domains and folders import from it.
export { createMailer, type Mailer } from './mailer.js';
export { hashApiKeySecret, looksLikeApiKey } from './apiKeySecret.js';
export { hashPassword, verifyPassword } from './passwords.js';
export { openIdentityServices, type IdentityOptions, type IdentityServices } from './identity.js';
export type { IdentityDeps } from './identityDeps.js';
export { SESSION_LIFETIME_MS } from './sessions.js';
export { passwordGate, PasswordGate, PASSWORD_BUSY_RETRY_AFTER_SECS, type PasswordGateStats } from './passwordGate.js';
