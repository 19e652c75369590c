// Masking secret option values for display.
import type { Mask } from './option.js';

const hidden = '****';

/** `scheme://user:password@host` → `scheme://user:****@host`; also hides a `password=` query parameter (libpq takes one). */
function maskUrlPassword(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/?#]*):[^@/?#]*@/i, `$1:${hidden}@`)
    .replace(/([?&]password=)[^&#]*/gi, `$1${hidden}`);
}

function maskUrlUserinfo(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/?#]+@/i, `$1${hidden}@`);
}

/** A value as it may be shown to an operator or written to a log. */
export function maskValue(mask: Mask, value: unknown): unknown {
  if (value === null || value === undefined || mask === 'none') return value;
  if (mask === 'attrValues') {
    if (typeof value !== 'object' || Array.isArray(value)) return hidden;
    return Object.fromEntries(Object.keys(value).map((name) => [name, hidden]));
  }
  if (typeof value !== 'string') return hidden;
  switch (mask) {
    case 'all':
      return hidden;
    case 'partial':
      return value.length > 8 ? value.slice(0, 4) + hidden : hidden;
    case 'urlPassword':
      return maskUrlPassword(value);
    case 'urlUserinfo':
      return maskUrlUserinfo(value);
  }
}
