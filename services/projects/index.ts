// The public face of services/projects/: what other domains and folders import from it.
export { projectsService } from './projects.js';
export { tasksService, DEFAULT_TASK } from './tasks.js';
export { type ResolvePinnedProject, projectResolver, type PinnedProject } from './pinnedProject.js';
export { demandProjectPath } from './projectPath.js';
export { resolveHead } from './repositoryHead.js';
export { vetRepository, type RepositoryPolicy } from './repositoryPolicy.js';
