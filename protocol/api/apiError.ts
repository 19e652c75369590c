// The one error type a request can end in. Thrown by services and http alike; http turns it
// into `{error: true, message, code}` with `status`. Every code is listed in docs/errors.md.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** extra response headers (Retry-After on a 503) */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const isApiError = (e: unknown): e is ApiError => e instanceof ApiError;
