export { ApiError, isApiError } from './apiError.js';
