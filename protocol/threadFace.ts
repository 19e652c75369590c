// The part of protocol/'s public face the files a serving thread loads import (http/respond.ts):
// index.ts brings every API schema (zod) along, about 12 MiB of heap in each thread (docs/http.md, "Memory").
export { ApiError, isApiError } from './api/apiError.js';
