// Vite for the frontend: SvelteKit's plugin, and in `npm run dev` a proxy to a running kiln.
import { sveltekit } from '@sveltejs/kit/vite';
import { defineConfig } from 'vite';

// KILN_DEV_API is where `npm run dev` sends /api (REST and the live WebSockets): a kiln from `npm start`.
const api = process.env['KILN_DEV_API'] ?? 'http://127.0.0.1:3000';

export default defineConfig({
  plugins: [sveltekit()],
  server: {
    proxy: { '/api': { target: api, ws: true, changeOrigin: false } },
    fs: { allow: ['../protocol'] },
  },
  build: {
    target: 'es2022',
    reportCompressedSize: false,
    // Every module two or more entries (the app and the page nodes) use goes into one `shared`
    // chunk: split by Rolldown's defaults, the evaluation route named 18 chunks, six under 400 B,
    // each one more request queued on HTTP/1.1's six connections and one more module to link.
    rolldownOptions: { output: { codeSplitting: { groups: [{ name: 'shared', minShareCount: 2 }] } } },
  },
});
