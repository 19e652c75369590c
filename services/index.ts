export { anonymous, isSuperuser, type Anonymous, type KeyUser, type Principal, type SessionUser } from './principal.js';
