// How a schema failure reads in a message: its first problem, under the name of the field it is
// about, so every "field: reason" kiln writes (bodies, queries, config, wire messages) looks alike.
import type { z } from 'zod';

export interface IssueDescription {
  /** the dotted path of the value at fault; '' when it is the whole value */
  readonly path: string;
  /** what a message names: the path; else the unknown keys of a strict object; else `whole` */
  readonly field: string;
  readonly reason: string;
}

export function describeIssue(error: z.ZodError, whole: string): IssueDescription {
  const issue = error.issues[0];
  if (!issue) return { path: '', field: whole, reason: 'invalid' };
  const path = issue.path.map(String).join('.');
  const keys = 'keys' in issue && Array.isArray(issue.keys) ? issue.keys.join(', ') : '';
  return { path, field: path || keys || whole, reason: issue.message };
}
