import type { z } from 'zod';
import { ApiError } from '../protocol/index.js';

/**
 * The query string checked against a schema of string fields: a problem is a 400 invalid_query
 * naming the parameter (`per_page: Too big: expected number to be <=200`). A parameter given
 * twice counts once, with its last value.
 */
export function parseQuery<T>(query: URLSearchParams, schema: z.ZodType<T>): T {
  const parsed = schema.safeParse(Object.fromEntries(query));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const keys = issue && 'keys' in issue && Array.isArray(issue.keys) ? issue.keys.join(', ') : '';
    const where = issue && issue.path.length > 0 ? issue.path.join('.') : keys || 'query';
    throw new ApiError('invalid_query', `${where}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}
