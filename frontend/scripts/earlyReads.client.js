// Early reads of the evaluation page (copied, hashed, into the route's own index.html by
// routePreloads.js): a classic script that runs while the HTML is parsed and starts the page's two
// first API reads at once, instead of after the shell's modules have loaded and the router has run
// (the reads then overlap the shell's boot). lib/api.ts hands each answer to the first GET of the same
// path with the same token; a read nobody takes is simply dropped. Paths must be written exactly as
// the page asks for them: +page.ts (`/evals/{id}`) and lib/eval/pagedBuilds.svelte.ts (the first page).
(function () {
  var match = /^\/evals\/([^/]+)\/?$/.exec(location.pathname);
  if (!match) return;
  var token = null;
  try {
    token = sessionStorage.getItem('kiln.session') || localStorage.getItem('kiln.session');
  } catch (e) {
    return;
  }
  if (!token) return;
  var id = encodeURIComponent(decodeURIComponent(match[1]));
  var paths = ['/evals/' + id, '/evals/' + id + '/builds/page?page=1&per_page=100'];
  var reads = {};
  paths.forEach(function (path) {
    // High priority: on HTTP/1.1 these wait for one of six connections with the shell's module preloads.
    var response = fetch('/api/v1' + path, { priority: 'high', headers: { Accept: 'application/json', Authorization: 'Bearer ' + token } });
    // Unhandled until the page takes it (or never): not an error of its own.
    response.catch(function () {});
    reads[path] = { token: token, response: response };
  });
  window.kilnEarlyReads = reads;
})();
