// The headers on every response of the web UI: a strict Content-Security-Policy and its companions.
import type { Headers } from '../reply.js';

/**
 * script-src 'self' with no inline script (the build moves SvelteKit's boot script to a file:
 * frontend/scripts/externalBoot.js). Styles allow inline attributes because Svelte sets style
 * attributes (SvelteKit's route announcer, transitions); a style cannot run code. The logo may come
 * from the operator's frontend.logoUrl, so its origin is allowed for images.
 */
export function uiSecurityHeaders(logoUrl: string | null): Headers {
  const images = ["'self'", 'data:'];
  if (logoUrl !== null) {
    try {
      images.push(new URL(logoUrl).origin);
    } catch {
      // A relative logo URL is served by this origin: 'self' covers it.
    }
  }
  const policy = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    `img-src ${images.join(' ')}`,
    "font-src 'self'",
    // The API and its live WebSockets are on this origin.
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
  return {
    'Content-Security-Policy': policy,
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
  };
}
