export { ApiError, isApiError } from './apiError.js';
export { Permission, permissionNames, Role, roleNames } from './permissions.js';
