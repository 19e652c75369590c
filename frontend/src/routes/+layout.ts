// The whole app renders in the browser: kiln serves one static index.html for every page path.
export const ssr = false;
export const prerender = false;
