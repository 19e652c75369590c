// SvelteKit's ambient types for this app (none of its server-side hooks are used: the app is static).
declare global {
  namespace App {}
}

export {};
