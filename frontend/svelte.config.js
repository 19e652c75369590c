// SvelteKit's configuration: a static single-page app (docs/frontend.md) served by kiln's http/.
import adapter from '@sveltejs/adapter-static';
import { vitePreprocess } from '@sveltejs/vite-plugin-svelte';

/** @type {import('@sveltejs/kit').Config} */
const config = {
  preprocess: vitePreprocess(),
  kit: {
    // Every unknown path gets index.html from kiln (http/frontend/), and the router takes over.
    adapter: adapter({ pages: 'build', assets: 'build', fallback: 'index.html', precompress: false, strict: true }),
    // The wire shapes live in protocol/api: pages import their types (import type only) through this alias.
    alias: { $protocol: '../protocol' },
    // Hashed file names under /_app/immutable are what kiln serves with immutable cache headers.
    appDir: '_app',
    output: { bundleStrategy: 'split' },
  },
};

export default config;
