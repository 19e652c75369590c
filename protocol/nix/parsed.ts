// The result of parsing untrusted text in a pure layer: a value, or the field that broke and why.
// Callers turn `{ ok: false }` into an ApiError naming the field (see STYLE.md).
export type Parsed<T> = { ok: true; value: T } | { ok: false; field: string; reason: string };

export const parsedOk = <T>(value: T): Parsed<T> => ({ ok: true, value });
export const parseFailure = (field: string, reason: string): { ok: false; field: string; reason: string } => ({
  ok: false,
  field,
  reason,
});
