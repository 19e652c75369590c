// The public face of services/gitHosts/: the Git host application's webhooks and status reports, and polling (docs/git-hosts.md).
export { createHostApi } from './hostApi.js';
export { hookReceiverService, type HookReceiverService } from './hookReceiver.js';
export { GitHostReporter } from './statusReports.js';
export { deleteOldHookDeliveries } from './deliveryRetention.js';
export { RepositoryPoller } from './repositoryPoller.js';
export { OpenPrRunner } from './openPrRuns.js';
export { cloneBaseUrl, repositoryAccess } from './repositoryAccess.js';
