// The live WebSocket paths, their uWS patterns, and what each asks for. Tokens come in the header
// `Authorization: Bearer <token>` or, for browsers (whose WebSocket API cannot set headers), in
// the query parameter `token`.
import { ApiError, splitEventGlobs } from '../../protocol/index.js';
import type { LiveRequest } from '../../services/index.js';

export interface LivePath {
  pattern: string;
  /** params: the pattern's parameters in order, percent-decoded */
  request(params: readonly string[], query: URLSearchParams): LiveRequest;
}

export const LIVE_PATHS: readonly LivePath[] = [
  { pattern: '/api/v1/metrics/events', request: (_p, q) => ({ kind: 'firehose', globs: splitEventGlobs(q.get('events')) }) },
  { pattern: '/api/v1/tasks/:project/:task/live', request: ([project, task]) => ({ kind: 'task', project: project!, task: task! }) },
  { pattern: '/api/v1/evals/:evaluation/live', request: ([evaluation]) => ({ kind: 'evaluation', evaluation: uuid(evaluation!, 'evaluation') }) },
  { pattern: '/api/v1/builds/:build/live', request: ([build]) => ({ kind: 'build', build: uuid(build!, 'build') }) },
  { pattern: '/api/v1/board/live', request: () => ({ kind: 'board' }) },
  { pattern: '/api/v1/board/cache/live', request: () => ({ kind: 'boardCache' }) },
  { pattern: '/api/v1/admin/actors/live', request: () => ({ kind: 'actors' }) },
];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function uuid(value: string, name: string): string {
  if (!UUID.test(value)) throw new ApiError('invalid_parameter', `${name}: must be a UUID`);
  return value;
}

export function decodeParam(raw: string, name: string): string {
  try {
    const value = decodeURIComponent(raw);
    if (value === '' || value.length > 200) throw new Error('empty or too long');
    return value;
  } catch {
    throw new ApiError('invalid_parameter', `${name}: not a valid path segment`);
  }
}

/** The token of an upgrade request: the Bearer header first, then ?token=. */
export function socketToken(authorization: string, query: URLSearchParams): string {
  if (authorization !== '') {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!bearer) throw new ApiError('invalid_token', 'the Authorization header must be "Bearer <token>"');
    return bearer[1]!;
  }
  const token = query.get('token');
  if (!token) throw new ApiError('unauthorized', 'live updates need a token: the header Authorization: Bearer <token> or the query parameter token');
  return token;
}
