// How a schema failure reads in a message: its first problem, under the name of the field it is
// about, so every "field: reason" kiln writes (bodies, queries, config, wire messages) looks alike.
import type { z } from 'zod';

export interface IssueDescription {
  /** the field's dotted path; the unknown keys for a strict object; else `whole` (the value itself) */
  readonly field: string;
  readonly reason: string;
}

export function describeIssue(error: z.ZodError, whole: string): IssueDescription {
  const issue = error.issues[0];
  if (!issue) return { field: whole, reason: 'invalid' };
  if (issue.path.length > 0) return { field: issue.path.map(String).join('.'), reason: issue.message };
  const keys = 'keys' in issue && Array.isArray(issue.keys) ? issue.keys.join(', ') : '';
  return { field: keys || whole, reason: issue.message };
}
