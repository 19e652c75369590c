// The public face of services/projects/: what other domains and folders import from it.
export { projectResolver, type ResolvePinnedProject } from './pinnedProject.js';
export { demandProjectPath } from './projectPath.js';
export { projectsService } from './projects.js';
export { listHeads, resolveHead, type RepositoryHeads } from './repositoryHead.js';
export { type RepositoryPolicy, vetRepository } from './repositoryPolicy.js';
export { DEFAULT_TASK, tasksService } from './tasks.js';
