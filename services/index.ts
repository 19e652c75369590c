export { anonymous, isSuperuser, type Principal } from './principal.js';
