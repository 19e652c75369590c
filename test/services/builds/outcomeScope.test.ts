// Whose word a build's outcome is (docs/builds.md, "Whose completion"): the projects of the workers
// that took part. A cluster build's members of rank ≥ 1 take part too, so a scoped member narrows
// the outcome even when rank 0 is kiln's own worker.
import t from 'tap';
import { outcomeScope } from '../../../services/builds/buildPlacement.js';

const own = { open: true, projects: [] };
const acme = { open: false, projects: ['p-acme-1', 'p-acme-2'] };
const acmeProject = { open: false, projects: ['p-acme-1'] };

t.same(outcomeScope([own]), null, 'kiln\'s own worker: every tenant');
t.same(outcomeScope([acme]), ['p-acme-1', 'p-acme-2'], 'a server\'s worker: its projects');
t.same(outcomeScope([own, own]), null, 'a cluster of kiln\'s own workers: every tenant');
t.same(outcomeScope([own, acme]), ['p-acme-1', 'p-acme-2'], 'rank 0 kiln\'s own, rank 1 a server\'s worker: that server\'s organization only');
t.same(outcomeScope([acme, acmeProject, own]), ['p-acme-1'], 'several scoped members: the projects all of them serve');
