// A changeJob, the open_pr task action's worker half (docs/git-hosts.md, "open_pr"): the commit is
// fetched into the project's clone as for an evaluation (with the job's read access, if any), then
// pushChange runs the command in a scratch clone under <baseDir>/tmp and force-pushes the change.
// Answers changeResult with the pushed commit (null: nothing changed) or jobFailed.
import { join } from 'node:path';
import type { ChangeJob, JobFailure } from '../protocol/index.js';
import { checkoutCommit } from './gitCheckout.js';
import { reply, type JobContext } from './jobContext.js';
import { ensurePrivateDirectory } from './privateDirectories.js';
import { pushChange } from './pullRequestChange.js';

export async function runChangeJob(job: ChangeJob, ctx: JobContext): Promise<void> {
  const started = Date.now();
  const env = ctx.settings.childEnv;
  const failed = (failure: JobFailure) =>
    reply(ctx, { t: 'jobFailed', jobId: job.jobId, failure, durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
  const checkout = await checkoutCommit(ctx.settings.baseDir, job.project, job.repository, job.commit, env, ctx.signal, job.access);
  if (!checkout.ok) return failed(checkout.failure);
  const scratchDir = join(ctx.settings.baseDir, 'tmp');
  await ensurePrivateDirectory(scratchDir);
  const outcome = await pushChange({
    clone: checkout.clone, commit: job.commit, command: job.command, repository: job.pushTo, access: job.pushAccess,
    branch: job.branch, author: job.author, message: job.message, env, scratchDir, signal: ctx.signal,
  });
  if (!outcome.ok) return failed(outcome.failure);
  ctx.log.info({ jobId: job.jobId, branch: job.branch, pushed: outcome.pushed }, outcome.pushed ? 'change pushed' : 'the command changed nothing');
  reply(ctx, { t: 'changeResult', jobId: job.jobId, pushed: outcome.pushed, durationMs: Date.now() - started });
}
