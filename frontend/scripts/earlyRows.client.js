// Early rows of the evaluation page (copied, hashed, into the route's own index.html by
// routePreloads.js, after earlyReads.client.js, deferred): draws the first builds of the page the
// early reads started as plain DOM, the moment that answer is in, before the shell's modules have
// been fetched, compiled and mounted (on a loaded machine that boot is most of the time to the first
// row). The markup is BuildsTable.svelte's (its classes are global in app.css), so the page looks
// the same when Svelte's own table replaces it: the evaluation page removes these rows once its own
// are drawn, and the layout removes them on any other page (lib/eval/earlyRows.ts). Every value is
// set as text, never as markup: build names and attributes are tenant text.
(function () {
  var reads = window.kilnEarlyReads;
  if (!reads) return;
  var path = Object.keys(reads).filter(function (p) { return p.indexOf('/builds/page?') !== -1; })[0];
  if (!path) return;
  /** rows drawn: what fits the table's height at any window size (the table is at most 36rem high) */
  var ROWS = 20;
  var ROW_PX = 36;
  var COLUMNS = ['Derivation', 'Attribute', 'System', 'Status', 'Time'];

  function element(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function cell(child) {
    var c = element('span');
    c.setAttribute('role', 'cell');
    if (typeof child === 'string') c.textContent = child;
    else if (child) c.appendChild(child);
    return c;
  }

  // format.ts's duration(), for a finished or running build.
  function duration(start, end) {
    if (!start) return '\u2014';
    var s = Math.round(Math.max(0, (end ? Date.parse(end) : Date.now()) - Date.parse(start)) / 1000);
    if (s < 60) return s + 's';
    var m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
    return Math.floor(m / 60) + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }

  function row(build, index) {
    var r = element('div', 'vrow');
    r.setAttribute('role', 'row');
    r.setAttribute('aria-rowindex', String(index + 2));
    r.style.transform = 'translateY(' + index * ROW_PX + 'px)';
    r.style.height = ROW_PX + 'px';
    var link = element('a', '', build.name);
    link.href = '/builds/' + encodeURIComponent(build.build_id);
    var status = element('span');
    status.appendChild(element('span', 'status status-' + build.status, build.status));
    if (build.failure) status.appendChild(element('span', 'muted', ' ' + (build.failure.reason || build.failure.class)));
    var name = cell(link);
    name.className = 'name';
    var attr = cell(build.attr || '');
    attr.className = 'attr';
    [name, attr, cell(build.system), cell(status), cell(duration(build.started_at, build.finished_at))].forEach(function (c) { r.appendChild(c); });
    return r;
  }

  function draw(page) {
    // The page's own table came first (a fast machine), or the page left: nothing to draw.
    if (window.kilnEarlyRowsDone || !document.getElementById('app') || location.pathname.indexOf('/evals/') !== 0) return;
    var builds = page.builds.slice(0, ROWS);
    if (builds.length === 0) return;
    var root = element('div', 'early-rows');
    root.id = 'kiln-early-rows';
    root.appendChild(element('h1', '', 'Evaluation'));
    root.appendChild(element('h2', '', 'Builds'));
    var table = element('div', 'vtable');
    table.setAttribute('role', 'table');
    table.setAttribute('aria-label', 'Builds of this evaluation');
    table.setAttribute('aria-rowcount', String(page.total + 1));
    var head = element('div', 'vrow head');
    head.setAttribute('role', 'row');
    head.setAttribute('aria-rowindex', '1');
    COLUMNS.forEach(function (name) {
      var h = element('span', '', name);
      h.setAttribute('role', 'columnheader');
      head.appendChild(h);
    });
    var headGroup = element('div');
    headGroup.setAttribute('role', 'rowgroup');
    headGroup.appendChild(head);
    var scroller = element('div', 'vscroll');
    scroller.setAttribute('role', 'rowgroup');
    var inner = element('div');
    inner.style.position = 'relative';
    inner.style.height = page.total * ROW_PX + 'px';
    builds.forEach(function (b, i) { inner.appendChild(row(b, i)); });
    scroller.appendChild(inner);
    table.appendChild(headGroup);
    table.appendChild(scroller);
    root.appendChild(table);
    document.getElementById('app').prepend(root);
  }

  reads[path].response
    .then(function (response) { return response.ok ? response.clone().json() : null; })
    .then(function (envelope) {
      var page = envelope && envelope.message;
      if (page && Array.isArray(page.builds)) draw(page);
    })
    .catch(function () {
      // The page reads it again and shows the failure: these rows are only a head start.
    });
})();
