// The one error type a request can end in. Thrown by services and http alike; http/server.ts turns
// it into `{error: true, message, code}` with the status errorCodes.ts declares for the code.
import { errorCodes, type ErrorCode } from './errorCodes.js';

export interface ApiErrorOptions {
  /** extra response headers: Retry-After on a 503, Upload-Offset on a 409, a Basic challenge on a 401 */
  readonly headers?: Readonly<Record<string, string>>;
  /** facts for code that catches the error (not sent to the client) */
  readonly details?: Readonly<Record<string, unknown>>;
}

export class ApiError extends Error {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = errorCodes[code].status;
    this.headers = options.headers ?? {};
    this.details = options.details ?? {};
  }

  /** The same refusal with more response headers (a route adding its own, like the sandbox headers). */
  withHeaders(headers: Readonly<Record<string, string>>): ApiError {
    return new ApiError(this.code, this.message, { headers: { ...this.headers, ...headers }, details: this.details });
  }
}

export const isApiError = (e: unknown): e is ApiError => e instanceof ApiError;
