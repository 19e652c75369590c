// Which per-route index.html a page path gets (http/frontend/routeIndex.ts): literals, [params],
// a literal over a param in the same place, a trailing slash, and no match.
import t from 'tap';
import { routeIndex } from '../../../http/frontend/routeIndex.js';

const entries = [
  { route: '/', html: 'root' },
  { route: '/new/[kind]', html: 'new-any' },
  { route: '/new/org', html: 'new-org' },
  { route: '/projects/[org]/[project]', html: 'project' },
  { route: '/gone', html: 'not-in-the-build' },
];
const files = new Map(entries.filter((e) => e.html !== 'not-in-the-build').map((e) => [e.html, e.html]));
const match = routeIndex(entries, (html) => files.get(html));
const at = (path: string) => match(path.split('/').slice(1));

t.equal(at('/'), 'root');
t.equal(at('/new/org'), 'new-org', 'a literal wins over a param in the same place');
t.equal(at('/new/project'), 'new-any');
t.equal(at('/projects/acme/web'), 'project');
t.equal(at('/projects/acme/web/'), 'project', 'a trailing slash is the same page');
t.equal(at('/projects/acme'), undefined, 'too few segments');
t.equal(at('/projects/acme/web/more'), undefined, 'too many');
t.equal(at('/projects//web'), undefined, 'a param is never empty');
t.equal(at('/gone'), undefined, 'an entry whose file is missing is skipped');
