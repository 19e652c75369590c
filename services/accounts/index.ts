// The public face of services/accounts/: what other domains and folders import from it.
export { hashApiKeySecret } from './apiKeySecret.js';
export { type IdentityServices, openIdentityServices } from './identity.js';
export { createMailer, type Mailer } from './mailer.js';
export { passwordGate, PasswordGate } from './passwordGate.js';
export { hashPassword, verifyPassword } from './passwords.js';
export { createTokenAuthentication, type TokenAuthentication } from './tokenAuthentication.js';
export { deleteExpiredSessions } from './sessionRetention.js';
