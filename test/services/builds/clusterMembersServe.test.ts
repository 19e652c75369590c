// A cluster job's members all build for one project of the build (services/builds/clusterPlacement.ts,
// chooseServing): each member's buildJob carries that project's caches, a read token for its
// private ones included. A derivation shared by projects of two organizations must not be placed
// on a worker serving only the other one (an organization's own build server), which would get a
// token for caches it may not read.
import t from 'tap';
import { chooseServing } from '../../../services/builds/clusterPlacement.js';
import type { ConnectedWorker } from '../../../services/workers/index.js';

const worker = (workerId: string, projects: string[], zone: string | null = null) =>
  ({ hello: { workerId, zone }, projects, open: false, running: { jobs: 0 } }) as unknown as ConnectedWorker;
const serves = (w: ConnectedWorker, project: string) => w.open || w.projects.includes(project);
const ids = (members: readonly ConnectedWorker[] | undefined) => (members ?? []).map((m) => m.hello.workerId);

t.test('every member serves the project whose caches the members get', async (t) => {
  const build = { projects: ['org-x-project', 'org-y-project'], required_features: ['cluster-2'] };
  const x = worker('x', ['org-x-project']);
  const y1 = worker('y1', ['org-y-project']);
  const y2 = worker('y2', ['org-y-project']);
  const placed = chooseServing([x, y1, y2], build, 2, serves);
  t.equal(placed?.project, 'org-y-project', 'the project two workers serve');
  t.same(ids(placed?.members), ['y1', 'y2'], 'never org x\'s worker beside org y\'s');
  t.equal(chooseServing([x, y1], build, 2, serves), null, 'no project with two workers: not placed');
  const both = chooseServing([x, worker('x2', ['org-x-project']), y1], build, 2, serves);
  t.same([both?.project, ids(both?.members)], ['org-x-project', ['x', 'x2']]);
});

t.test('zones still apply within the project', async (t) => {
  const build = { projects: ['p'], required_features: ['cluster-2', 'zone-east'] };
  const placed = chooseServing([worker('w1', ['p'], 'west'), worker('w2', ['p'], 'west'), worker('e1', ['p'], 'east'), worker('e2', ['p'], 'east')], build, 2, serves);
  t.same([placed?.zone, ids(placed?.members)], ['east', ['e1', 'e2']]);
});
