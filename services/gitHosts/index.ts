// The public face of services/gitHosts/: the Git host application's webhooks and status reports (docs/git-hosts.md).
export { createHostApi, type HostApi } from './hostApi.js';
export { hookReceiverService, type HookOutcome, type HookReceiverService } from './hookReceiver.js';
export { GitHostReporter } from './statusReports.js';
